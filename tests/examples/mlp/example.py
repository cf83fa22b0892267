from pathlib import Path

from tests.helpers.images import small_images

CONFIG = "mlp.yaml"
# Metrics every run logs.
LOGGED = ["train/loss", "train/acc", "train/epoch_loss", "val/loss", "val/acc", "val/confidence", "lr-Adam"]
# What its callbacks log as media (images, tables) to a logger that takes them.
MEDIA = ["val/confusion_matrix"]


def shrink(shapes_root: Path | None) -> list[str]:
    return small_images(shapes_root)
