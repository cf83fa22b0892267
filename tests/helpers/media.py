"""The media tables a run without a native-media logger writes as CSV files (trainrig/loggers/media.py)."""

import csv
from pathlib import Path

__all__ = ["media_tables"]


def media_tables(log_dir: Path, key: str) -> list[list[list[str]]]:
    return [list(csv.reader(path.open())) for path in sorted(log_dir.rglob(f"media/{key}/*.csv"))]
