"""Lightning's default profiler without its cost per hook.

Lightning wraps every hook it calls in `trainer.profiler.profile(name)`: the module's, the strategy's and each
callback's (every per-batch hook, overridden or not, but for those the template skips as doing nothing,
trainrig/monitoring/idle_hooks.py), some 25 a training step in a run of the template. Its default,
`PassThroughProfiler`, records nothing, yet builds a generator-based context manager for each (about 1 us on a
2-core CPU): on a fast loop a few percent of the host's time a step (`benchmarks/host_time.py`), which on a GPU is
time the device may wait. The template's default records nothing for free; a config that chooses a profiler
(`--trainer.profiler simple`) keeps it.
"""

from contextlib import nullcontext

from lightning.pytorch import Trainer
from lightning.pytorch.profilers import PassThroughProfiler
from typing_extensions import override

__all__ = ["NoProfiler", "without_profiling_cost"]

_NOTHING = nullcontext()


class NoProfiler(PassThroughProfiler):
    @override
    def profile(self, action_name: str) -> nullcontext:
        return _NOTHING


def without_profiling_cost(trainer: Trainer) -> None:
    """Replaces Lightning's default profiler (the config chose none) by `NoProfiler`."""
    if type(trainer.profiler) is PassThroughProfiler:
        trainer.profiler = NoProfiler()
