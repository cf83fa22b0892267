"""`--trainer.strategy.init_args.compile true`: `torch.compile` under every strategy, at the point each one needs.

The option has one name on every strategy: `fsdp2`, `pipeline` and `layer_split` take it, and so do `ddp` (every
`ddp*` name) and `single_device`, whose Lightning classes do not: the subclasses here (`CompilingDDPStrategy`,
`CompilingSingleDeviceStrategy`) take over those registry names with the same presets, and a run's record still
names the Lightning class each stands in for (trainrig/strategies/record.py). A run without a strategy flag (`auto`)
is Lightning's own single-device strategy: add `--trainer.strategy single_device` to compile on one device.

What compiles is always the forward of the model's own blocks, each in place, never the LightningModule's
steps: a step logs and updates metrics, which break graphs, and under DDP Lightning runs the step inside the DDP
wrapper's forward, so a compiled step puts all of that into the graphs DDPOptimizer splits (Lightning #18798, where
a model compiled before Lightning wrapped it in DDP failed in DDPOptimizer). In place, the parameters keep their
names (no `_orig_mod.`): a compiled run's checkpoints load under any strategy, compiled or not, and the wrappers
the strategies put around the model stay what Lightning expects. Where each strategy compiles:

- one device: each sharding unit (`sharding_units()`), once the model is on its device;
- ddp: each sharding unit, after Lightning wraps the model in DDP (torch's order, wrapper first). The graphs are
  built on the first step, inside DDP's forward, so DDPOptimizer splits them at DDP's gradient buckets and the
  all-reduce of one bucket overlaps the backward of the next (torchtitan compiles the same blocks);
- fsdp2: each sharding unit after tensor parallelism and activation checkpointing, before `fully_shard`
  (`FSDP2Strategy._parallelize`), so FSDP's all-gathers between units stay outside the graphs;
- pipeline: each stage this process runs, before `PipelineStage` wraps it (the schedule sends activations between
  stages, outside the graphs);
- layer_split: each stage, once it is on its device.
"""

import torch
from lightning.pytorch.strategies import DDPStrategy, SingleDeviceStrategy
from lightning.pytorch.utilities import rank_zero_info
from torch import nn
from typing_extensions import override

from trainrig.errors import UserInputError
from trainrig.strategies.sharding import ShardedModel, model_sharding_units

__all__ = [
    "REPLACED",
    "CompilingDDPStrategy",
    "CompilingSingleDeviceStrategy",
    "apply_compile",
    "compile_units",
    "report_compiled",
]


def apply_compile(modules: list[nn.Module]) -> list[nn.Module]:
    """Compile each module's `forward` on its own (torchtitan's per-block compile): the same code compiles once for
    all blocks of a shape, and whatever runs between them (a strategy's communication) stays outside the graphs.
    The graphs are built at each module's first call. Returns the modules compiled.

    `forward`, not the whole call (`nn.Module.compile`): the call also runs the hooks a strategy puts on the module,
    and dynamo refuses FSDP2's ("skipping FSDP hooks"), after which nothing of the call was compiled (seen: fsdp2 runs
    that built no graph). Hooks run as they are, around the compiled forward."""
    for module in modules:
        module.forward = torch.compile(module.forward)
    return list(modules)


def compile_units(module: nn.Module, strategy_name: str) -> list[nn.Module]:
    """The blocks a data-parallel strategy compiles: the model's sharding units, or a UserInputError."""
    if not isinstance(module, ShardedModel):
        raise UserInputError(
            f"{type(module).__name__} does not declare sharding_units(), the blocks --trainer.strategy.init_args."
            f"compile compiles one by one under {strategy_name}; implement trainrig.strategies.sharding.ShardedModel "
            "or leave compile off"
        )
    return model_sharding_units(module)


def report_compiled(strategy_name: str, modules: list[nn.Module]) -> None:
    rank_zero_info(f"{strategy_name}: compiled {len(modules)} module(s) with torch.compile")


class CompilingDDPStrategy(DDPStrategy):
    """Lightning's DDP with `compile`: each sharding unit compiled in place after the DDP wrapper is in place."""

    def __init__(self, compile: bool = False, **kwargs):
        """
        Args:
            compile: `torch.compile` each of the model's sharding units, after wrapping the model in DDP.
            kwargs: Lightning's DDPStrategy's.
        """
        super().__init__(**kwargs)
        self.compile = compile
        self._compiled: list[nn.Module] = []

    def layout(self) -> dict:
        """What a run's checkpoints record (trainrig/strategies/record.py): whether this process compiled."""
        return {"compiled": bool(self._compiled)}

    @override
    def connect(self, model) -> None:
        if self.compile:
            compile_units(model, "ddp")
        super().connect(model)

    @override
    def setup(self, trainer) -> None:
        super().setup(trainer)  # wraps the model in DDP when fitting
        if self.compile and not self._compiled:
            self._compiled = apply_compile(compile_units(self.lightning_module, "ddp"))
            report_compiled("ddp", self._compiled)


class CompilingSingleDeviceStrategy(SingleDeviceStrategy):
    """Lightning's single-device strategy with `compile`, on the trainer's device unless `device` names one."""

    def __init__(self, device: str | None = None, compile: bool = False, **kwargs):
        """
        Args:
            device: e.g. cpu or cuda:1; unset, the device `--trainer.accelerator` and `--trainer.devices` select.
            compile: `torch.compile` each of the model's sharding units, once the model is on its device.
            kwargs: Lightning's SingleDeviceStrategy's.
        """
        super().__init__(device=device or "cpu", **kwargs)
        self.device = device
        self.compile = compile
        # Lightning's accelerator connector fills this in with the trainer's devices (it does so for every strategy
        # that has the attribute): the device to use when `device` is unset.
        self.parallel_devices: list[torch.device] | None = None
        self._compiled: list[nn.Module] = []

    @property
    @override
    def root_device(self) -> torch.device:
        if self.device is None and self.parallel_devices:
            return self.parallel_devices[0]
        return super().root_device

    def layout(self) -> dict:
        """What a run's checkpoints record (trainrig/strategies/record.py): whether the run compiled."""
        return {"compiled": bool(self._compiled)}

    @override
    def connect(self, model) -> None:
        if self.compile:
            compile_units(model, "single_device")
        super().connect(model)

    @override
    def setup(self, trainer) -> None:
        super().setup(trainer)
        if self.compile and not self._compiled:
            self._compiled = apply_compile(compile_units(self.lightning_module, "single_device"))
            report_compiled("single_device", self._compiled)


# Lightning's classes and the subclasses that take over every registry name of theirs (trainrig/strategies/__init__).
REPLACED = {DDPStrategy: CompilingDDPStrategy, SingleDeviceStrategy: CompilingSingleDeviceStrategy}
