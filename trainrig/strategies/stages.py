"""What both model-parallel strategies need from a model: its stages, and ways to move them aside.

How a model is split belongs here, with the strategies; the model only lists its stages (`StagedModel`, the
interface it implements without importing it) and never learns which device or process runs them.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol, runtime_checkable

from torch import nn
from typing_extensions import override

from trainrig.errors import UserInputError


@runtime_checkable
class StagedModel(Protocol):
    """A model whose forward pass is its stages run one after another."""

    def stages(self) -> list[nn.Module]:
        """Consecutive parts of the network whose composition is the whole forward pass."""
        ...


def model_stages(module: nn.Module, strategy_name: str) -> list[nn.Module]:
    """The stages a LightningModule declares, or a UserInputError that says which models can be split."""
    if not isinstance(module, StagedModel):
        raise UserInputError(
            f"{type(module).__name__} does not declare stages(), so the {strategy_name} strategy cannot split it; "
            "use a model that implements trainrig.strategies.stages.StagedModel or --trainer.strategy ddp"
        )
    stages = list(module.stages())
    if not stages:
        raise UserInputError(
            f"{type(module).__name__}.stages() returned no stage; the {strategy_name} strategy needs at least one"
        )
    return stages


def replace_submodule(root: nn.Module, old: nn.Module, new: nn.Module) -> None:
    """Put `new` wherever `old` sits in `root`'s module tree, keeping the state_dict names of everything else."""
    found = False
    for parent in root.modules():
        for name, child in parent._modules.items():
            if child is old:
                parent._modules[name] = new
                found = True
    if not found:
        raise UserInputError(
            f"stage {type(old).__name__} returned by stages() is not a submodule of {type(root).__name__}"
        )


class StageElsewhere(nn.Module):
    """Stands in for a stage whose parameters live on another device or in another process."""

    def __init__(self, index: int, location: str):
        super().__init__()
        self.index, self.location = index, location

    @override
    def forward(self, *args, **kwargs):
        raise RuntimeError(
            f"stage {self.index} lives in {self.location}; the strategy runs the stages, so the model's own "
            "forward cannot"
        )

    @override
    def extra_repr(self) -> str:
        return f"stage={self.index}, location={self.location!r}"


@contextmanager
def stages_set_aside(root: nn.Module, stages: list[nn.Module]) -> Iterator[None]:
    """Temporarily detach the stages, so that e.g. `root.to(device)` moves only what is not a stage."""
    stand_ins = [StageElsewhere(index, "its own device") for index in range(len(stages))]
    for stage, stand_in in zip(stages, stand_ins):
        replace_submodule(root, stage, stand_in)
    try:
        yield
    finally:
        for stage, stand_in in zip(stages, stand_ins):
            replace_submodule(root, stand_in, stage)
