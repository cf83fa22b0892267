"""A learnable stand-in for an image data set: procedurally drawn shapes, written once as an image folder.

No image data set can be downloaded on an offline machine, so the image examples train
on this by default. The images go through exactly the same image-folder path as real data.
"""

import json
import math
import os
import shutil
from pathlib import Path

import numpy as np
from jsonargparse.typing import NonNegativeInt, OpenUnitInterval, PositiveInt, restricted_number_type
from PIL import Image, ImageDraw

from datamodules.image_folder import ImageFolderDataModule
from trainrig.errors import UserInputError

SHAPES = ("circle", "cross", "ring", "square", "triangle")
# Fewer than two images of a shape cannot be split into training and validation.
AtLeastTwoInt = restricted_number_type("AtLeastTwoInt", int, (">=", 2))


def _polygon(center: tuple[float, float], radius: float, corners: int, angle: float) -> list[tuple[float, float]]:
    return [
        (
            center[0] + radius * math.cos(angle + 2 * math.pi * k / corners),
            center[1] + radius * math.sin(angle + 2 * math.pi * k / corners),
        )
        for k in range(corners)
    ]


def _distinct_colours(rng: np.random.Generator) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Background and foreground far enough apart in brightness to stay visible in grayscale."""
    while True:
        background, foreground = rng.integers(0, 256, size=(2, 3))
        if abs(int(background.mean()) - int(foreground.mean())) >= 70:
            return tuple(int(c) for c in background), tuple(int(c) for c in foreground)


def draw_shape(shape: str, size: int, rng: np.random.Generator) -> Image.Image:
    background, foreground = _distinct_colours(rng)
    image = Image.new("RGB", (size, size), background)
    draw = ImageDraw.Draw(image)
    radius = rng.uniform(0.18, 0.36) * size
    center = tuple(rng.uniform(radius + 1, size - radius - 1, size=2))
    angle = rng.uniform(0, 2 * math.pi)
    box = (center[0] - radius, center[1] - radius, center[0] + radius, center[1] + radius)
    if shape == "circle":
        draw.ellipse(box, fill=foreground)
    elif shape == "ring":
        draw.ellipse(box, outline=foreground, width=max(2, int(radius / 3)))
    elif shape == "square":
        draw.polygon(_polygon(center, radius, 4, angle), fill=foreground)
    elif shape == "triangle":
        draw.polygon(_polygon(center, radius, 3, angle), fill=foreground)
    elif shape == "cross":
        width = max(2, int(radius / 2.5))
        for arm in (angle, angle + math.pi / 2):
            dx, dy = radius * math.cos(arm), radius * math.sin(arm)
            draw.line((center[0] - dx, center[1] - dy, center[0] + dx, center[1] + dy), fill=foreground, width=width)
    else:
        raise ValueError(f"unknown shape {shape!r}")
    noise = rng.normal(0, 12, size=(size, size, 3))
    return Image.fromarray(np.clip(np.asarray(image, dtype=np.float32) + noise, 0, 255).astype(np.uint8))


def write_shapes_folder(destination: Path, images_per_class: int, canvas_size: int, seed: int) -> None:
    """Write the folder next to `destination` and rename it into place, so a crash never leaves half a data set."""
    staging = destination.with_name(f".{destination.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    rng = np.random.default_rng(seed)
    for shape in SHAPES:
        (staging / shape).mkdir(parents=True)
        for index in range(images_per_class):
            draw_shape(shape, canvas_size, rng).save(staging / shape / f"{shape}_{index:05d}.png")
    (staging / "generation.json").write_text(
        json.dumps({"images_per_class": images_per_class, "canvas_size": canvas_size, "seed": seed})
    )
    try:
        staging.rename(destination)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        if not destination.is_dir():
            raise


class SyntheticShapesDataModule(ImageFolderDataModule):
    """Five shape classes drawn in random colours, sizes, positions and rotations over noise."""

    def __init__(
        self,
        root: str = "data/generated",
        images_per_class: AtLeastTwoInt = 300,
        canvas_size: PositiveInt = 64,
        generation_seed: int = 0,
        image_size: PositiveInt = 64,
        train_fraction: OpenUnitInterval = 0.8,
        seed: int = 42,
        classes: list[str] | None = None,
        grayscale: bool = False,
        augment: bool = True,
        batch_size: PositiveInt = 64,
        num_workers: NonNegativeInt = 2,
    ):
        """
        Args:
            root: parent folder; each generated variant gets its own sub-folder, written once and reused.
            images_per_class: images drawn per shape.
            canvas_size: pixel size the shapes are drawn at (then resized to `image_size`).
        """
        super().__init__(root, image_size, train_fraction, seed, classes, grayscale, augment, batch_size, num_workers)

    @property
    def image_root(self) -> Path:
        hp = self.hparams
        return Path(hp.root) / f"shapes-{hp.canvas_size}px-{hp.images_per_class}-seed{hp.generation_seed}"

    @property
    def class_names(self) -> list[str]:
        wanted = self.hparams.classes
        if wanted is None:
            return list(SHAPES)
        unknown = sorted(set(wanted) - set(SHAPES))
        if unknown:
            raise UserInputError(f"classes {unknown} are not among the generated shapes {list(SHAPES)}")
        return sorted(wanted)

    def prepare_data(self) -> None:
        if not self.image_root.is_dir():
            self.image_root.parent.mkdir(parents=True, exist_ok=True)
            write_shapes_folder(
                self.image_root, self.hparams.images_per_class, self.hparams.canvas_size, self.hparams.generation_seed
            )
