"""A torchvision ResNet declared as a chain of stages, so the model-parallel strategies can split it."""

import re
from collections import OrderedDict

from torch import nn
from torchvision.models import ResNet

from models.staged import even_groups, run_stages

# What a torchvision ResNet's forward runs, in order, by its module names; `flatten` is the torch.flatten call
# between the pooling and the classifier.
PARTS = {
    "stem": ("conv1", "bn1", "relu", "maxpool"),
    "layer1": ("layer1",),
    "layer2": ("layer2",),
    "layer3": ("layer3",),
    "layer4": ("layer4",),
    "head": ("avgpool", "flatten", "fc"),
}
# A state_dict key of a ResNet module, grouped into stages (`blocks.<stage>.`) or as torchvision saves it.
_KEY = re.compile(r"(?:blocks\.\d+\.)?(?P<module>[a-z]+\d?)(?P<rest>\..+)")


class StagedResNet(nn.Module):
    """Any torchvision ResNet (resnet*, wide_resnet*, resnext*) as stem, layer1..layer4 and the pooled head, grouped
    into `num_stages` consecutive stages.

    The modules keep torchvision's names inside their stage (`blocks.0.conv1.weight`, `blocks.1.fc.weight`), and
    loading accepts keys of any other grouping or of a plain torchvision ResNet: a checkpoint saved with 2 stages
    loads with 4, and ImageNet weights load as they are. Batch norm normalizes whatever batch reaches it: under
    a pipeline, one micro-batch.
    """

    def __init__(self, resnet: ResNet, num_stages: int):
        super().__init__()
        parts = list(PARTS.values())
        modules = {
            name: nn.Flatten() if name == "flatten" else getattr(resnet, name) for names in parts for name in names
        }
        groups = [[name for part in group for name in parts[part]] for group in even_groups(len(parts), num_stages)]
        self.blocks = nn.ModuleList(
            nn.Sequential(OrderedDict((name, modules[name]) for name in names)) for names in groups
        )
        self._stage_of = {name: index for index, group in enumerate(groups) for name in group}
        self.register_load_state_dict_pre_hook(self._keys_of_this_grouping)

    def stages(self) -> list[nn.Module]:
        return list(self.blocks)

    def sharding_units(self) -> list[nn.Module]:
        """Every residual block of layer1..layer4 (`trainrig.strategies.sharding.ShardedModel`); the stem and the
        head are small and stay with the root."""
        return [
            block
            for stage in self.blocks
            for name, part in stage.named_children()
            if name.startswith("layer")
            for block in part
        ]

    def forward(self, images):
        return run_stages(self.stages(), images)

    def _keys_of_this_grouping(self, module, state_dict, prefix, *args) -> None:
        """Rename each ResNet module's keys to the stage that holds it here, before torch matches them."""
        for key in [key for key in state_dict if key.startswith(prefix)]:
            match = _KEY.fullmatch(key.removeprefix(prefix))
            if match and match["module"] in self._stage_of:
                stage = self._stage_of[match["module"]]
                state_dict[f"{prefix}blocks.{stage}.{match['module']}{match['rest']}"] = state_dict.pop(key)


__all__ = ["PARTS", "StagedResNet"]
