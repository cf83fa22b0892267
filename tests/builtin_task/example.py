"""The built-in task as tests/helpers/examples.py reads an example (tests/examples/<example>/example.py): the tests
that hold for every example run on it in a project that keeps none. Its config sits beside it, not in configs/, where
a project keeps only its own; CONFIG is its path from configs/, as the tests join it."""

from pathlib import Path

CONFIG = "../tests/builtin_task/builtin_task.yaml"
# Metrics every run logs.
LOGGED = ["train/loss", "val/loss", "val/acc", "lr-Adam"]


def shrink(shapes_root: Path | None) -> list[str]:
    """Already seconds long; the tests' generated images are for the image examples."""
    return []
