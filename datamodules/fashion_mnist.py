"""FashionMNIST (28x28 grayscale clothing, 10 classes) through torchvision, for the MLP."""

from pathlib import Path

import torch
from jsonargparse.typing import NonNegativeInt, OpenUnitInterval, PositiveInt
from torch.utils.data import random_split
from torchvision import transforms
from torchvision.datasets import FashionMNIST

from datamodules.splits import SplitsDataModule
from trainrig.errors import UserInputError, explained_download


class FashionMNISTDataModule(SplitsDataModule):
    model_arguments = ("num_classes", "input_size")
    class_names = FashionMNIST.classes
    num_classes = len(FashionMNIST.classes)
    input_size = 28 * 28
    training_draws_random_numbers = False  # no augmentation

    def __init__(
        self,
        root: str = "data",
        download: bool = False,
        val_fraction: OpenUnitInterval = 0.1,
        seed: int = 42,
        batch_size: PositiveInt = 100,
        num_workers: NonNegativeInt = 2,
    ):
        """
        Args:
            root: folder that holds (or will hold) `FashionMNIST/raw`.
            download: fetch the data into `root` when missing (needs network access).
            val_fraction: share of the 60,000 training images held out for validation; the test split is the official
            one.
        """
        super().__init__()
        self.save_hyperparameters()

    def prepare_data(self) -> None:
        root = Path(self.hparams.root)
        if self.hparams.download:
            remedy = f"copy the four FashionMNIST *-ubyte.gz files into {root / 'FashionMNIST' / 'raw'} instead"
            with explained_download("FashionMNIST", remedy):
                for train in (True, False):
                    FashionMNIST(root, train=train, download=True)
        elif not (root / "FashionMNIST" / "raw").is_dir():
            raise UserInputError(
                f"FashionMNIST not found in {root / 'FashionMNIST' / 'raw'}; set --data.init_args.download "
                "true on a machine with "
                "network access, or copy the files there and point --data.init_args.root at the parent folder"
            )

    def setup(self, stage: str) -> None:
        if self.train_set is not None:
            return
        to_tensor = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,), (0.5,))])
        try:
            full_train = FashionMNIST(self.hparams.root, train=True, transform=to_tensor)
            self.test_set = FashionMNIST(self.hparams.root, train=False, transform=to_tensor)
        except RuntimeError as error:
            raise UserInputError(f"FashionMNIST in {self.hparams.root} is incomplete or corrupt: {error}") from error
        num_val = int(len(full_train) * self.hparams.val_fraction)
        generator = torch.Generator().manual_seed(self.hparams.seed)
        self.train_set, self.val_set = random_split(
            full_train, [len(full_train) - num_val, num_val], generator=generator
        )
