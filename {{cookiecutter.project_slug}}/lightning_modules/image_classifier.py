"""The CNN example: a torchvision backbone picked by name, trained as an image classifier."""

import torch
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable

from lightning_modules.classification import ClassificationModule
from models.image_backbones import build_backbone


class ImageClassifier(ClassificationModule):
    def __init__(
        self,
        num_classes: int,
        backbone: str = "resnet18",
        pretrained: bool = False,
        optimizer: OptimizerCallable = torch.optim.Adam,
        scheduler: LRSchedulerCallable | None = None,
    ):
        """
        Args:
            num_classes: linked from the datamodule by `cli.py`.
            backbone: any torchvision classification model name (resnet18, resnet50, ...).
            pretrained: start from ImageNet weights; they must be in the torch hub cache when offline.
        """
        super().__init__(num_classes, optimizer, scheduler)
        self.save_hyperparameters(ignore=["optimizer", "scheduler"])
        self.network = build_backbone(backbone, num_classes, pretrained)
