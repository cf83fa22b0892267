"""The model-parallel example: an MLP classifier whose network is declared as stages."""

import torch
from jsonargparse.typing import PositiveInt
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import nn

from lightning_modules.classification import ClassificationModule
from models.staged_mlp import StagedMLP
from trainrig.errors import UserInputError


class MLPClassifier(ClassificationModule):
    def __init__(
        self,
        num_classes: int,
        input_size: PositiveInt = 784,
        hidden_sizes: tuple[PositiveInt, ...] = (200,),
        num_stages: PositiveInt = 2,
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
        num_layers = len(hidden_sizes) + 1
        if num_stages > num_layers:
            raise UserInputError(
                f"--model.init_args.num_stages {num_stages} is more than the network's {num_layers} layers; "
                "lower it or add --model.init_args.hidden_sizes"
            )
        self.save_hyperparameters(ignore=["optimizer", "scheduler"])
        self.network = StagedMLP(input_size, hidden_sizes, num_classes, num_stages)

    def stages(self) -> list[nn.Module]:
        return self.network.stages()

    def sharding_units(self) -> list[nn.Module]:
        return self.network.sharding_units()

    def tensor_parallel_plan(self) -> dict[str, str]:
        return {f"network.{name}": style for name, style in self.network.tensor_parallel_plan().items()}
