"""A task of the tests' own, for a project that keeps no example: points in a few Gaussian clusters, generated from
a fixed seed, and a small classifier of them, written as the README's "Your own data" and "Your own model" tell a
user (a plain shuffled `DataLoader`, `configure_optimization`), so that the tests that hold for every example
(tests/helpers/examples.py) test the machinery on it. Its class paths import from the project root, as `cli.py`
and the processes of every launcher import a user's classes."""

import torch
from jsonargparse.typing import NonNegativeInt, PositiveInt
from lightning.pytorch import LightningDataModule, LightningModule
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from typing_extensions import override

from lightning_modules.optimization import check_optimizer, configure_optimization

FEATURES = 8
CLASSES = 3


class ClusterPoints(LightningDataModule):
    """`points_per_class` points around each of `CLASSES` centres in `FEATURES` dimensions, a fifth of them held out."""

    def __init__(
        self, points_per_class: PositiveInt = 100, batch_size: PositiveInt = 16, num_workers: NonNegativeInt = 0
    ):
        super().__init__()
        self.save_hyperparameters()

    @override
    def setup(self, stage: str) -> None:
        generator = torch.Generator().manual_seed(0)
        centres = 4 * torch.randn(CLASSES, FEATURES, generator=generator)
        labels = torch.arange(CLASSES).repeat_interleave(self.hparams.points_per_class)
        points = centres[labels] + torch.randn(len(labels), FEATURES, generator=generator)
        order = torch.randperm(len(labels), generator=generator)
        held_out = len(labels) // 5
        self.val_set = TensorDataset(points[order[:held_out]], labels[order[:held_out]])
        self.train_set = TensorDataset(points[order[held_out:]], labels[order[held_out:]])

    @override
    def train_dataloader(self) -> DataLoader:
        return DataLoader(
            self.train_set, batch_size=self.hparams.batch_size, shuffle=True, num_workers=self.hparams.num_workers
        )

    @override
    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val_set, batch_size=self.hparams.batch_size, num_workers=self.hparams.num_workers)


class ClusterClassifier(LightningModule):
    def __init__(
        self,
        hidden_size: PositiveInt = 16,
        optimizer: OptimizerCallable = torch.optim.Adam,
        scheduler: LRSchedulerCallable | None = None,
    ):
        super().__init__()
        check_optimizer(optimizer)
        self.save_hyperparameters()
        self.optimizer, self.scheduler = optimizer, scheduler
        self.net = nn.Sequential(nn.Linear(FEATURES, hidden_size), nn.ReLU(), nn.Linear(hidden_size, CLASSES))

    def sharding_units(self) -> list[nn.Module]:
        """Each linear layer a unit of its own, for the fsdp2 strategy (trainrig/strategies/sharding.py)."""
        return [layer for layer in self.net if isinstance(layer, nn.Linear)]

    @override
    def forward(self, points: torch.Tensor) -> torch.Tensor:
        return self.net(points)

    @override
    def training_step(self, batch, batch_idx):
        points, labels = batch
        loss = nn.functional.cross_entropy(self(points), labels)
        self.log("train/loss", loss)
        return loss

    @override
    def validation_step(self, batch, batch_idx):
        points, labels = batch
        logits = self(points)
        self.log("val/loss", nn.functional.cross_entropy(logits, labels))
        self.log("val/acc", (logits.argmax(dim=1) == labels).float().mean())

    @override
    def predict_step(self, batch, batch_idx):
        points, _ = batch
        return self(points).argmax(dim=1)

    @override
    def configure_optimizers(self):
        return configure_optimization(self, self.optimizer, self.scheduler)
