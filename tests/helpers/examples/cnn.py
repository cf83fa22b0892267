from pathlib import Path

from tests.helpers.examples._images import small_images

CONFIG = "cnn.yaml"


def shrink(shapes_root: Path | None) -> list[str]:
    return [*small_images(shapes_root), "--data.init_args.image_size", "32"]
