"""Helpers for models split into stages, the one interface a model implements to be split across devices or
processes (`trainrig.strategies.stages.StagedModel`).

A staged model is a chain: `forward(x)` equals running `stages()` one after another. The model-parallel strategies
(`trainrig/strategies/`) place and run the stages; the model itself never mentions a device.
"""

from torch import nn


def run_stages(stages: list[nn.Module], x):
    for stage in stages:
        x = stage(x)
    return x


def even_groups(num_parts: int, num_stages: int) -> list[range]:
    """Which consecutive parts (by index) each of `num_stages` stages holds, as equal in number as they can be."""
    if not 1 <= num_stages <= num_parts:
        raise ValueError(f"num_stages must be between 1 and the number of parts ({num_parts}), got {num_stages}")
    bounds = [round(i * num_parts / num_stages) for i in range(num_stages + 1)]
    return [range(start, end) for start, end in zip(bounds, bounds[1:])]
