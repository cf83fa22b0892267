from pathlib import Path

from tests.helpers.images import small_images

CONFIG = "cnn.yaml"
# Its runs are slow enough that the tests comparing launchers run it with -m slow.
HEAVY = True
# Batch norm normalizes each rank's share of the batch by its own statistics (SyncBatchNorm needs a GPU).
DDP_DIFFERS = "batch norm normalizes each rank's share by its own statistics"
# Metrics every run logs.
LOGGED = ["train/loss", "train/acc", "val/loss", "val/acc", "val/acc_top5", "val/confidence", "lr-AdamW"]
# What its callbacks log as media (images, tables) to a logger that takes them, and as versioned artifacts.
MEDIA = ["examples/example_images", "train_predictions"]
ARTIFACTS = ["train_predictions"]


def shrink(shapes_root: Path | None) -> list[str]:
    return [*small_images(shapes_root), "--data.init_args.image_size", "32"]
