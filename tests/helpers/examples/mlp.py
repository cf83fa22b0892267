from pathlib import Path

from tests.helpers.examples._images import small_images

CONFIG = "mlp.yaml"


def shrink(shapes_root: Path | None) -> list[str]:
    return small_images(shapes_root)
