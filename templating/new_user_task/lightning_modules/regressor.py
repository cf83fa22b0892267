"""An MLP regressor, as a new user writes one from the README's "Your own model"."""

import torch
from lightning.pytorch import LightningModule
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import nn

from lightning_modules.optimization import check_optimizer, configure_optimization


class Regressor(LightningModule):
    def __init__(
        self,
        num_features: int,
        hidden_size: int = 32,
        optimizer: OptimizerCallable = torch.optim.Adam,
        scheduler: LRSchedulerCallable | None = None,
    ):
        super().__init__()
        check_optimizer(optimizer)
        self.save_hyperparameters()
        self.optimizer, self.scheduler = optimizer, scheduler
        self.net = nn.Sequential(nn.Linear(num_features, hidden_size), nn.ReLU(), nn.Linear(hidden_size, 1))

    def training_step(self, batch, batch_idx):
        features, target = batch
        loss = nn.functional.mse_loss(self.net(features), target)
        self.log("train/loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        features, target = batch
        self.log("val/loss", nn.functional.mse_loss(self.net(features), target))

    def configure_optimizers(self):
        return configure_optimization(self, self.optimizer, self.scheduler)
