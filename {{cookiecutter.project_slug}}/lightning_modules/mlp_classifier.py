"""The model-parallel example: an MLP classifier whose network is declared as stages."""

import torch
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import nn

from lightning_modules.classification import ClassificationModule
from models.staged_mlp import StagedMLP


class MLPClassifier(ClassificationModule):
    def __init__(
        self,
        num_classes: int,
        input_size: int = 784,
        hidden_sizes: tuple[int, ...] = (200,),
        num_stages: int = 2,
        optimizer: OptimizerCallable = torch.optim.Adam,
        scheduler: LRSchedulerCallable | None = None,
    ):
        """
        Args:
            num_classes: linked from the datamodule by `cli.py`.
            input_size: pixels per image (channels x height x width), linked from the datamodule.
            hidden_sizes: widths of the hidden layers; the reference is a single 200.
            num_stages: how many consecutive stages the layers are grouped into for model parallelism.
        """
        super().__init__(num_classes, optimizer, scheduler)
        self.save_hyperparameters(ignore=["optimizer", "scheduler"])
        self.network = StagedMLP(input_size, hidden_sizes, num_classes, num_stages)

    def stages(self) -> list[nn.Module]:
        return self.network.stages()
