from pathlib import Path

CONFIG = "lstm.yaml"
# The loss is a mean over the batch's characters that are not padding: each rank divides by its own count.
DDP_DIFFERS = "the loss averages each rank's own count of non-padding characters"
# Metrics every run logs.
LOGGED = ["train/loss", "train/perplexity", "val/loss", "val/perplexity", "lr-Adam"]
# What its callbacks log as media (images, tables) to a logger that takes them.
MEDIA = ["generated_names"]


def shrink(shapes_root: Path | None) -> list[str]:
    return ["--data.init_args.batch_size", "256"]
