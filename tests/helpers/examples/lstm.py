from pathlib import Path

CONFIG = "lstm.yaml"
# Metrics every run logs.
LOGGED = ["train/loss", "train/perplexity", "val/loss", "val/perplexity"]


def shrink(shapes_root: Path | None) -> list[str]:
    return ["--data.init_args.batch_size", "256"]
