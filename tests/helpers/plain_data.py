"""A user's own datamodule written the plain way, from the README's "Your own data": a `DataLoader` with
`shuffle=True`, no template helper. Random tensors a small MLP classifies (configs/mlp.yaml's model with
`--data tests.helpers.plain_data.PlainDataModule`); `iterable` serves the same samples as an IterableDataset."""

import torch
from lightning.pytorch import LightningDataModule
from torch.utils.data import DataLoader, IterableDataset, TensorDataset

__all__ = ["PlainDataModule"]


class Streamed(IterableDataset):
    def __init__(self, samples: TensorDataset):
        self.samples = samples

    def __iter__(self):
        return iter(self.samples)


class PlainDataModule(LightningDataModule):
    model_arguments = ("num_classes", "input_size")

    def __init__(
        self, samples: int = 64, batch_size: int = 8, num_workers: int = 0, shuffle: bool = True, iterable: bool = False
    ):
        super().__init__()
        self.samples, self.batch_size, self.num_workers = samples, batch_size, num_workers
        self.shuffle, self.iterable = shuffle, iterable
        self.num_classes, self.input_size = 4, 16

    def setup(self, stage: str) -> None:
        generator = torch.Generator().manual_seed(0)
        images = torch.randn(self.samples, self.input_size, generator=generator)
        labels = torch.randint(0, self.num_classes, (self.samples,), generator=generator)
        self.train_set, self.val_set = TensorDataset(images, labels), TensorDataset(images[:16], labels[:16])

    def train_dataloader(self) -> DataLoader:
        if self.iterable:
            return DataLoader(Streamed(self.train_set), batch_size=self.batch_size)
        return DataLoader(
            self.train_set,
            batch_size=self.batch_size,
            shuffle=self.shuffle,
            num_workers=self.num_workers,
            persistent_workers=self.num_workers > 0,
        )

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val_set, batch_size=8)
