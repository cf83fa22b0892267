from pathlib import Path

from tests.helpers.examples._images import small_images

CONFIG = "mlp.yaml"
# Metrics every run logs.
LOGGED = ["train/loss", "train/acc", "val/loss", "val/acc", "val/confidence"]


def shrink(shapes_root: Path | None) -> list[str]:
    return small_images(shapes_root)
