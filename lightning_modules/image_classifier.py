"""The CNN example: a torchvision backbone picked by name, trained as an image classifier."""

import torch
from jsonargparse.typing import PositiveInt
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import nn
from torchvision.models import ResNet

from lightning_modules.classification import ClassificationModule
from models.image_backbones import build_backbone
from models.staged_resnet import PARTS, StagedResNet
from trainrig.errors import UserInputError


class ImageClassifier(ClassificationModule):
    def __init__(
        self,
        num_classes: int,
        backbone: str = "resnet18",
        pretrained: bool = False,
        num_stages: PositiveInt = 2,
        optimizer: OptimizerCallable = torch.optim.Adam,
        scheduler: LRSchedulerCallable | None = None,
    ):
        """
        Args:
            num_classes: linked from the datamodule by `cli.py`.
            backbone: any torchvision classification model name (resnet18, resnet50, ...).
            pretrained: start from ImageNet weights; they must be in the torch hub cache when offline.
            num_stages: consecutive stages a ResNet is grouped into, for the pipeline.
        """
        super().__init__(num_classes, optimizer, scheduler)
        self.save_hyperparameters(ignore=["optimizer", "scheduler"])
        self.network = build_backbone(backbone, num_classes, pretrained)
        # Any number of stages loads any checkpoint: a resumed run takes num_stages from its command line, not
        # from the checkpoint's hyperparameters.
        self.hparams.pop("num_stages")
        if isinstance(self.network, ResNet):
            if num_stages > len(PARTS):
                raise UserInputError(
                    f"--model.init_args.num_stages {num_stages} is more than {backbone}'s {len(PARTS)} parts "
                    f"({', '.join(PARTS)}); lower it"
                )
            self.network = StagedResNet(self.network, num_stages)

    def stages(self) -> list[nn.Module]:
        if not isinstance(self.network, StagedResNet):
            raise UserInputError(
                f"backbone {self.hparams.backbone!r} has no known split into stages; the model-parallel strategies "
                "split ResNets (resnet*, wide_resnet*, resnext*, e.g. --model.init_args.backbone resnet18); "
                "or use --trainer.strategy ddp"
            )
        return self.network.stages()

    def sharding_units(self) -> list[nn.Module]:
        if not isinstance(self.network, StagedResNet):
            raise UserInputError(
                f"backbone {self.hparams.backbone!r} has no known sharding units; the fsdp2 strategy shards ResNets "
                "(resnet*, wide_resnet*, resnext*, e.g. --model.init_args.backbone resnet18) block by block; "
                "or use --trainer.strategy ddp"
            )
        return self.network.sharding_units()
