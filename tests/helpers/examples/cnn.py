from pathlib import Path

from tests.helpers.examples._images import small_images

CONFIG = "cnn.yaml"
# Metrics every run logs.
LOGGED = ["train/loss", "train/acc", "val/loss", "val/acc", "val/acc_top5", "val/confidence", "lr-Adam"]


def shrink(shapes_root: Path | None) -> list[str]:
    return [*small_images(shapes_root), "--data.init_args.image_size", "32"]
