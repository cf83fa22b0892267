"""Offline W&B runs for the tests: the shrunk runs that make them, and the records of their run files
(`run-*.wandb`), read back so tests can check what was logged.

The file is a LevelDB-style log: a 7-byte header, then 32 KiB blocks of chunks, each with a
4-byte checksum, a 2-byte length, a 1-byte type (full, first, middle, last) and a piece of a
serialised `wandb_internal_pb2.Record`.
"""

import json
import os
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from wandb.proto import wandb_internal_pb2

from tests.helpers.runs import ROOT, small_run_args

HEADER_SIZE, BLOCK_SIZE, CHUNK_HEADER_SIZE = 7, 32768, 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def read_records(path: Path):
    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a W&B run file"
    position, pending = HEADER_SIZE, b""
    while position + CHUNK_HEADER_SIZE <= len(data):
        space_in_block = BLOCK_SIZE - position % BLOCK_SIZE
        if space_in_block < CHUNK_HEADER_SIZE:
            position += space_in_block
            continue
        _, length, kind = struct.unpack("<IHB", data[position : position + CHUNK_HEADER_SIZE])
        chunk = data[position + CHUNK_HEADER_SIZE : position + CHUNK_HEADER_SIZE + length]
        position += CHUNK_HEADER_SIZE + length
        if kind == 0:
            break
        pending = chunk if kind in (FULL, FIRST) else pending + chunk
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            yield record


@dataclass
class OfflineRun:
    project: str = ""
    name: str = ""
    group: str = ""
    tags: list[str] = field(default_factory=list)
    config: dict = field(default_factory=dict)
    history: list[dict] = field(default_factory=list)
    artifacts: list[tuple[str, str]] = field(default_factory=list)

    def values(self, key: str) -> list:
        return [row[key] for row in self.history if key in row]


def read_offline_run(run_dir: Path, timeout_s: float = 60) -> OfflineRun:
    """Wait for the run's exit record (the W&B service writes the file asynchronously), then collect what was logged."""
    (run_file,) = run_dir.glob("run-*.wandb")
    deadline = time.monotonic() + timeout_s
    records = list(read_records(run_file))
    while not any(record.WhichOneof("record_type") == "exit" for record in records):
        assert time.monotonic() < deadline, f"{run_file} has no exit record after {timeout_s} s"
        time.sleep(0.5)
        records = list(read_records(run_file))
    run = OfflineRun()
    for record in records:
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run.project, run.name, run.group, run.tags = (
                record.run.project,
                record.run.display_name,
                record.run.run_group,
                list(record.run.tags),
            )
            run.config.update({item.key: json.loads(item.value_json) for item in record.run.config.update})
        elif kind == "config":
            run.config.update({item.key: json.loads(item.value_json) for item in record.config.update})
        elif kind == "history":
            run.history.append(
                {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
            )
        elif kind == "artifact":
            run.artifacts.append((record.artifact.name, record.artifact.type))
    return run


WANDB_CONFIG = str(ROOT / "configs" / "logger" / "wandb.yaml")


def wandb_run_args(config: str, log_dir: Path, shapes_root: Path, *extra: str) -> list[str]:
    args = small_run_args(config, log_dir, shapes_root, *extra)
    return (
        args[:2]
        + ["--config", WANDB_CONFIG]
        + args[2:]
        + ["--trainer.logger.init_args.group", "tests", "--trainer.logger.init_args.tags", "[offline, ci]"]
    )


def offline_runs(log_dir: Path):
    return [read_offline_run(run_dir) for run_dir in sorted(log_dir.rglob("offline-run-*")) if run_dir.is_dir()]


def run_offline(args: list[str]) -> str:
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, "cli.py", "fit", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout + result.stderr
