"""A CSV of numeric features and a target, as a new user writes one: a plain shuffled DataLoader, no template helper."""

import csv

import torch
from lightning.pytorch import LightningDataModule
from torch.utils.data import DataLoader, TensorDataset, random_split


class TabularData(LightningDataModule):
    model_arguments = ("num_features",)

    def __init__(self, csv_path: str, batch_size: int = 32, num_workers: int = 0):
        super().__init__()
        self.save_hyperparameters()

    @property
    def num_features(self) -> int:
        with open(self.hparams.csv_path, newline="") as handle:
            return len(next(csv.reader(handle))) - 1

    def setup(self, stage: str) -> None:
        with open(self.hparams.csv_path, newline="") as handle:
            rows = [[float(value) for value in row] for row in list(csv.reader(handle))[1:]]
        table = torch.tensor(rows)
        dataset = TensorDataset(table[:, :-1], table[:, -1:])
        self.train_set, self.val_set = random_split(dataset, [0.8, 0.2], generator=torch.Generator().manual_seed(0))

    def train_dataloader(self) -> DataLoader:
        return DataLoader(
            self.train_set, batch_size=self.hparams.batch_size, shuffle=True, num_workers=self.hparams.num_workers
        )

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val_set, batch_size=self.hparams.batch_size, num_workers=self.hparams.num_workers)
