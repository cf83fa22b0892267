"""Which strategy a launched job runs and how it places the job's processes, decided by the strategy's class: the
one classification behind every launcher's refusals and the processes it starts.

Lightning's DDP and single-device strategies count as themselves also where the project registers them again with a
`compile` option (trainrig/strategies/compile.py): `ddp` is DDP, `single_device` is one device.
"""

from dataclasses import dataclass
from enum import Enum

from lightning.pytorch.strategies import DDPStrategy, ParallelStrategy, SingleDeviceStrategy

from trainrig.errors import UserInputError
from trainrig.strategies.compile import REPLACED
from trainrig.strategies.strategy_option import STRATEGY_FLAG, flag_values, strategy_class

__all__ = ["JobStrategy", "Placement", "pipeline_hint", "placement", "strategy_arguments", "take_strategy"]


class Placement(Enum):
    """How a strategy places a job's processes."""

    DDP = "DDP"  # Lightning's DDP by any of its names: every launcher's default, a process per device
    PROCESS_PER_DEVICE = "process per device"  # another multi-process strategy (fsdp2, pipeline, ...): placed like DDP
    ONE_PROCESS = "one process"  # one process with every device of one node (layer_split)


@dataclass(frozen=True)
class JobStrategy:
    """The strategy a launched job runs: `--trainer.strategy` as given after `--` (None: DDP, the default), and how
    it places the processes."""

    name: str | None = None
    placement: Placement = Placement.DDP


def placement(value) -> Placement | None:
    """How the strategy `--trainer.strategy value` selects places a launched job's processes; None for a value no
    launcher runs: `auto`, a single device, anything that names no strategy."""
    selected = strategy_class(value)
    if selected is None or selected in (SingleDeviceStrategy, REPLACED[SingleDeviceStrategy]):
        return None
    if selected in (DDPStrategy, REPLACED[DDPStrategy]):
        return Placement.DDP
    if issubclass(selected, ParallelStrategy):
        return Placement.PROCESS_PER_DEVICE
    if issubclass(selected, SingleDeviceStrategy):
        return Placement.ONE_PROCESS
    return None


def pipeline_hint(over: str) -> str:
    """`, or pipeline to spread the stages over <over>` for a refusal of a one-process strategy, where the project has
    the pipeline strategy (a generated project without a staged model has not), else nothing."""
    return f", or pipeline to spread the stages over {over}" if strategy_class("pipeline") is not None else ""


def take_strategy(overrides: tuple[str, ...], runs_in: str) -> tuple[JobStrategy, tuple[str, ...]]:
    """`--trainer.strategy NAME` taken out of the overrides (the launcher places it), the last one given winning;
    refused when a value names no strategy that runs `runs_in` (e.g. "in the pods"). DDP by any name is the default."""
    given, rest = flag_values(list(overrides), STRATEGY_FLAG)
    placements = [placement(value) for value in given]
    for value, placed in zip(given, placements, strict=True):
        if placed is None:
            raise UserInputError(
                f"{STRATEGY_FLAG} {value!r} cannot run {runs_in}: give ddp, fsdp2 or another "
                "strategy of trainrig/strategies"
            )
    if not given or placements[-1] is Placement.DDP:
        return JobStrategy(), tuple(rest)
    return JobStrategy(given[-1], placements[-1]), tuple(rest)


def strategy_arguments(value) -> list[str]:
    """The `--trainer.strategy` arguments that choose the strategy a parsed config names (a name, a class path or
    `{class_path, init_args}`); none for `auto` or none at all, where a launcher runs DDP."""
    if isinstance(value, dict):
        value = value.get("class_path")
    return [] if value in (None, "auto") else [STRATEGY_FLAG, str(value)]
