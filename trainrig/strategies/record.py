"""What parallelism a run really ran with, recorded in each of its checkpoints under `parallelism`.

A config says what was asked for; the trainer's strategy is what ran (a later `--trainer.strategy` replaces an
earlier one, a launcher sets the processes up). The record is read back by whoever needs to know: a user comparing
runs, and the tests, which check every run they start under a named strategy, schedule or launcher against it.
"""

from typing import Any

import torch
from lightning.pytorch import Callback, LightningModule, Trainer
from typing_extensions import override

from trainrig.strategies.compile import REPLACED

__all__ = ["CHECKPOINT_KEY", "ParallelismRecord", "parallelism_of"]

CHECKPOINT_KEY = "parallelism"
# compile.py's subclasses, by the Lightning class whose registry names each takes over.
STANDS_IN_FOR = {subclass: lightning_class for lightning_class, subclass in REPLACED.items()}


def parallelism_of(trainer: Trainer) -> dict[str, Any]:
    """The strategy's class (for a subclass of compile.py, the Lightning class it stands in for: a run under `ddp`
    records DDPStrategy, compiled or not), the processes and machines, the environment that set the processes up (it
    names the launcher: LightningEnvironment for Lightning's own, TorchElasticEnvironment for torchrun, each launcher's
    own), the device this process trained on, its precision and the process group's backend (gloo, nccl; None
    without one), whether the model was compiled (`compile`, trainrig/strategies/compile.py; false for a strategy
    without the option), and what the strategy itself reports of its layout (`layout()`, e.g. a pipeline's schedule
    and stages)."""
    strategy = trainer.strategy
    environment = getattr(strategy, "cluster_environment", None)
    layout = strategy.layout() if callable(getattr(strategy, "layout", None)) else {}
    return {
        "strategy": STANDS_IN_FOR.get(type(strategy), type(strategy)).__name__,
        "processes": trainer.world_size,
        "nodes": trainer.num_nodes,
        "environment": type(environment).__name__ if environment is not None else None,
        "device": str(strategy.root_device),
        "precision": trainer.precision,
        "backend": torch.distributed.get_backend() if torch.distributed.is_initialized() else None,
        "compiled": False,
        **layout,
    }


class ParallelismRecord(Callback):
    """Writes `parallelism_of(trainer)` into every checkpoint the run saves."""

    @override
    def on_save_checkpoint(self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict) -> None:
        checkpoint[CHECKPOINT_KEY] = parallelism_of(trainer)
