"""Image classification networks picked from torchvision by name."""

from pathlib import Path

import torch
from torch import nn

from trainrig.errors import UserInputError, explained_download


def build_backbone(name: str, num_classes: int, pretrained: bool) -> nn.Module:
    """A torchvision classifier with a `num_classes` head; pretrained weights only from a local cache or a quick
    download."""
    from torchvision import models

    if name not in models.list_models(module=models):
        raise UserInputError(
            f"unknown backbone {name!r}; torchvision classifiers include resnet18, resnet50, "
            "mobilenet_v3_small, efficientnet_b0"
        )
    if not pretrained:
        return models.get_model(name, weights=None, num_classes=num_classes)
    weights = models.get_model_weights(name).DEFAULT
    network = models.get_model(name, weights=None)
    network.load_state_dict(_load_weights(weights))
    _replace_head(network, num_classes)
    return network


def _load_weights(weights) -> dict[str, torch.Tensor]:
    cache = Path(torch.hub.get_dir()) / "checkpoints" / Path(weights.url).name
    if cache.is_file():
        return torch.load(cache, map_location="cpu", weights_only=True)
    remedy = f"put {cache.name} into {cache.parent} or set model.init_args.pretrained to false"
    with explained_download(f"pretrained weights {cache.name}", remedy):
        return torch.hub.load_state_dict_from_url(weights.url, map_location="cpu", progress=False)


def _replace_head(network: nn.Module, num_classes: int) -> None:
    """Swap the ImageNet classifier of a pretrained network for one with `num_classes` outputs."""
    for attribute in ("fc", "classifier", "head", "heads"):
        head = getattr(network, attribute, None)
        if head is None:
            continue
        if isinstance(head, nn.Linear):
            setattr(network, attribute, nn.Linear(head.in_features, num_classes))
            return
        if isinstance(head, nn.Sequential) and isinstance(head[-1], nn.Linear):
            head[-1] = nn.Linear(head[-1].in_features, num_classes)
            return
    raise UserInputError(
        f"cannot find the classifier head of {type(network).__name__} to resize to {num_classes} classes"
    )
