"""Images stored one sub-folder per class (the ImageNet layout), split into train and val."""

import copy
from pathlib import Path

import torch
from jsonargparse.typing import NonNegativeInt, OpenUnitInterval, PositiveInt
from PIL import Image, UnidentifiedImageError
from torch.utils.data import Subset
from torchvision import transforms
from torchvision.datasets import ImageFolder
from typing_extensions import override

from datamodules.splits import SplitsDataModule
from trainrig.errors import UserInputError

IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def load_image(path: str) -> Image.Image:
    try:
        with Image.open(path) as image:
            return image.convert("RGB")
    except (OSError, UnidentifiedImageError, SyntaxError) as error:
        raise UserInputError(f"cannot read image {path}: {error}") from error


class ChosenClassesFolder(ImageFolder):
    """An ImageFolder restricted to the given class sub-folders, reporting unreadable images by path."""

    def __init__(self, root: str, class_names: list[str], **kwargs):
        self.class_names = class_names
        super().__init__(root, loader=load_image, **kwargs)

    def find_classes(self, directory):
        return self.class_names, {name: index for index, name in enumerate(self.class_names)}


class ImageFolderDataModule(SplitsDataModule):
    model_arguments = ("num_classes", "input_size")

    def __init__(
        self,
        root: str,
        image_size: PositiveInt = 224,
        train_fraction: OpenUnitInterval = 0.8,
        seed: int = 42,
        classes: list[str] | None = None,
        grayscale: bool = False,
        augment: bool = True,
        batch_size: PositiveInt = 64,
        num_workers: NonNegativeInt = 2,
        how_to_get: str = "",
    ):
        """
        Args:
            root: folder with one sub-folder of images per class.
            image_size: images are resized and cropped to this square size.
            train_fraction: share of images used for training; the rest is validation (and test).
            seed: fixes the split, independent of the training seed.
            classes: train on these class folders only (default: all).
            grayscale: one channel instead of three.
            augment: random crops and flips for the training split.
            how_to_get: where the data set comes from, repeated in the error when `root` is missing.
        """
        super().__init__()
        self.save_hyperparameters()

    @property
    def image_root(self) -> Path:
        return Path(self.hparams.root)

    @property
    def class_names(self) -> list[str]:
        root = self.image_root
        if not root.is_dir():
            hint = f"{self.hparams.how_to_get.rstrip('.')}, then " if self.hparams.how_to_get else ""
            raise UserInputError(
                f"image folder {root} does not exist; {hint}point --data.init_args.root at a folder with one "
                "sub-folder of images per class"
            )
        found = sorted(entry.name for entry in root.iterdir() if entry.is_dir() and not entry.name.startswith("."))
        if not found:
            raise UserInputError(
                f"image folder {root} has no class sub-folders; expected {root}/<class name>/<image files>"
            )
        wanted = self.hparams.classes
        if wanted is not None and (missing := sorted(set(wanted) - set(found))):
            raise UserInputError(f"classes {missing} are not sub-folders of {root}")
        chosen = found if wanted is None else sorted(set(wanted))
        if len(chosen) < 2:
            given = "--data.init_args.classes names" if wanted is not None else f"{root} has"
            raise UserInputError(
                f"image folder: {given} only {len(chosen)} class ({', '.join(chosen)}); a classifier needs at least "
                f"two: add a sub-folder of images per class to {root}"
            )
        return chosen

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    @property
    def input_size(self) -> int:
        channels = 1 if self.hparams.grayscale else 3
        return channels * self.hparams.image_size**2

    @property
    @override
    def training_draws_random_numbers(self) -> bool:
        """Only the random crops and flips draw; without them a training image loads the same every time."""
        return self.hparams.augment

    def _transforms(self, train: bool):
        size, grayscale = self.hparams.image_size, self.hparams.grayscale
        if train and self.hparams.augment:
            steps = [
                transforms.RandomResizedCrop(size, scale=(0.6, 1.0), antialias=True),
                transforms.RandomHorizontalFlip(),
            ]
        else:
            steps = [transforms.Resize(size, antialias=True), transforms.CenterCrop(size)]
        if grayscale:
            steps.append(transforms.Grayscale(num_output_channels=1))
        steps += [
            transforms.ToTensor(),
            transforms.Normalize((0.5,), (0.5,)) if grayscale else transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD),
        ]
        return transforms.Compose(steps)

    def setup(self, stage: str) -> None:
        if self.train_set is not None:
            return
        try:
            train_images = ChosenClassesFolder(
                str(self.image_root), self.class_names, transform=self._transforms(train=True)
            )
        except FileNotFoundError as error:
            raise UserInputError(f"image folder {self.image_root}: {error}") from error
        val_images = copy.copy(train_images)
        val_images.transform = self._transforms(train=False)

        generator = torch.Generator().manual_seed(self.hparams.seed)
        order = torch.randperm(len(train_images), generator=generator).tolist()
        num_train = round(len(order) * self.hparams.train_fraction)
        if num_train == 0 or num_train == len(order):
            raise UserInputError(
                f"image folder {self.image_root} has {len(order)} images, too few to split with "
                f"train_fraction {self.hparams.train_fraction}"
            )
        self.train_set = Subset(train_images, order[:num_train])
        self.val_set = Subset(val_images, order[num_train:])
