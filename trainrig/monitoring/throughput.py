"""Throughput at each log step, in every run, for the price of a clock read a step: samples a second, seconds a step,
the share of the time spent between steps (the loader's fetch and Lightning's bookkeeping), and on CUDA the peak
memory allocated, FLOPs a second and the model FLOPs utilization (MFU).

Unlike Lightning's `ThroughputMonitor`, which synchronizes the device at every step for its clock, this reads the
device only at the steps the loggers write: the clock runs from one log step to the next, after the queued kernels
have run (`torch.cuda.synchronize`), so the rates are exact over each window of `log_every_n_steps` steps. What a
sample is comes from the module: `samples_in(batch)` where it has one (the name generator counts characters), else
the batch's first dimension. The values are this process's; under DDP every process runs its share.

A step's FLOPs are counted once, at the first step on CUDA, on a copy of the module on the meta device (no memory, no
kernels, no random numbers drawn): the forward and backward of `module(batch[0])`, the examples' convention (the
batch's first element is what `forward` takes). MFU divides the FLOPs a second by the device's peak for the run's
precision from Lightning's table (`get_available_flops`), where the table knows the device.

The values go to the loggers directly, as Lightning's `LearningRateMonitor` writes the learning rate, at the step
Lightning's own row of that log step has (so `metrics.csv` gets a row of them beside that one, as it gets one of the
learning rate), not through `LightningModule.log`: each `log` call costs Lightning's result bookkeeping (the value's
record copied, its metadata deep-copied), a large share of a small model's step on a CPU
(`benchmarks/host_time.py`), and the throughput needs no reduction or epoch value. The progress bar reads `latest`.
"""

import copy
import time

import torch
from lightning.fabric.utilities.throughput import get_available_flops, measure_flops
from lightning.pytorch import Callback, LightningModule
from lightning.pytorch.utilities import rank_zero_warn
from torch.distributed.tensor import DTensor
from typing_extensions import override

from trainrig.monitoring.log_steps import is_log_step

__all__ = ["Throughput", "flops_per_batch", "with_throughput"]

# The compute dtype of each of Lightning's precision settings that is not float32.
_COMPUTE_DTYPES = {
    "bf16-mixed": torch.bfloat16,
    "bf16-true": torch.bfloat16,
    "16-mixed": torch.float16,
    "16-true": torch.float16,
    "64-true": torch.float64,
}


def _batch_size(batch) -> int:
    while isinstance(batch, (list, tuple, dict)):
        batch = next(iter(batch.values())) if isinstance(batch, dict) else batch[0]
    return len(batch)


def _on_meta(tensor: torch.Tensor) -> torch.Tensor:
    meta = torch.empty_like(tensor, device="meta")
    return (
        torch.nn.Parameter(meta, requires_grad=tensor.requires_grad) if isinstance(tensor, torch.nn.Parameter) else meta
    )


def flops_per_batch(module: LightningModule, batch) -> int:
    """The FLOPs of a training step's forward and backward of `module(batch[0])`, counted on a meta-device copy of
    `module` (its parameters and buffers replaced, not copied, so a large model costs no memory)."""
    tensors = [*module.parameters(), *module.buffers()]
    if any(isinstance(tensor, DTensor) for tensor in tensors):
        # A sharded module's hooks would gather its shards, collectives on meta tensors.
        raise ValueError("the module's parameters are sharded")
    meta_module = copy.deepcopy(module, memo={id(tensor): _on_meta(tensor) for tensor in tensors})
    for block in meta_module.modules():
        # A compiled block's forward is set on the instance (trainrig/strategies/compile.py), bound to the original.
        block.__dict__.pop("forward", None)
    inputs = _on_meta(batch[0])
    return measure_flops(meta_module, lambda: meta_module(inputs), lambda output: output.sum())


class Throughput(Callback):
    def __init__(self) -> None:
        self.latest: dict[str, float] = {}  # the values of the last log step, for the progress bar

    @override
    def on_train_start(self, trainer, pl_module) -> None:
        self.on_cuda = pl_module.device.type == "cuda"
        self.flops_per_batch: int | None = None
        self.peak_flops: int | None = None
        if self.on_cuda:
            dtype = _COMPUTE_DTYPES.get(str(trainer.precision), torch.float32)
            self.peak_flops = get_available_flops(pl_module.device, dtype)
        self._restart(time.perf_counter())  # a run resumed mid-epoch starts no epoch

    @override
    def on_train_epoch_start(self, trainer, pl_module) -> None:
        self._restart(time.perf_counter())

    def _restart(self, now: float) -> None:
        self.window_start = self.step_end = now
        self.steps = 0
        self.samples: int | torch.Tensor = 0
        self.between_steps = 0.0

    @override
    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self.between_steps += time.perf_counter() - self.step_end
        count = getattr(pl_module, "samples_in", None)
        self.samples = self.samples + (count(batch) if count is not None else _batch_size(batch))
        if self.on_cuda and self.flops_per_batch is None:
            self.flops_per_batch = self._count_flops(pl_module, batch)

    def _count_flops(self, pl_module, batch) -> int:
        """0 where the module or batch does not follow the convention (said once): no FLOPs columns then."""
        try:
            return flops_per_batch(pl_module, batch)
        except Exception as error:  # a strategy's own parameter types, a batch of another shape: monitoring only
            rank_zero_warn(f"throughput: FLOPs not counted ({type(error).__name__}: {error}); no MFU logged")
            return 0

    @override
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.steps += 1
        if not is_log_step(trainer):
            self.step_end = time.perf_counter()
            return
        if self.on_cuda:
            torch.cuda.synchronize(pl_module.device)
        now = time.perf_counter()
        seconds = now - self.window_start
        values = {
            "throughput/samples_per_s": float(self.samples) / seconds,
            "throughput/s_per_step": seconds / self.steps,
            "throughput/between_steps_share": self.between_steps / seconds,
        }
        if self.on_cuda:
            values["throughput/peak_memory_gib"] = torch.cuda.max_memory_allocated(pl_module.device) / 2**30
        if self.flops_per_batch:
            values["throughput/flops_per_s"] = self.flops_per_batch * self.steps / seconds
            if self.peak_flops:
                values["throughput/mfu"] = values["throughput/flops_per_s"] / self.peak_flops
        self.latest = values
        step = trainer.fit_loop.epoch_loop._batches_that_stepped  # LearningRateMonitor's: Lightning's row's step
        for logger in trainer.loggers:
            logger.log_metrics(values, step=step)
        self._restart(now)


def with_throughput(callbacks: list[Callback]) -> list[Callback]:
    """`callbacks` with a `Throughput` first, unless they hold one already: the progress bar, later in the list,
    shows the values it logs at the same step."""
    return callbacks if any(isinstance(callback, Throughput) for callback in callbacks) else [Throughput(), *callbacks]
