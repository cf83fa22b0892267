"""The one interface a model implements to be split across devices or processes.

A staged model is a chain: `forward(x)` equals running `stages()` one after another. The
model-parallel strategies (`strategies/layer_split.py`, `strategies/pipeline.py`) place and
run the stages; the model itself never mentions a device.
"""

from typing import Protocol, runtime_checkable

from torch import nn


@runtime_checkable
class StagedModel(Protocol):
    def stages(self) -> list[nn.Module]:
        """Consecutive parts of the network whose composition is the whole forward pass."""
        ...


def run_stages(stages: list[nn.Module], x):
    for stage in stages:
        x = stage(x)
    return x
