from pathlib import Path

CONFIG = "lstm.yaml"


def shrink(shapes_root: Path | None) -> list[str]:
    return ["--data.init_args.batch_size", "256"]
