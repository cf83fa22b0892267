"""Throughput at each log step, for the price of a clock read a step: samples a second, seconds a step, the share of
the time between steps (the loader's fetch and Lightning's bookkeeping), and on CUDA the peak memory allocated.

Unlike Lightning's `ThroughputMonitor`, which synchronizes the device at every step for its clock, this reads the
device only at the steps the loggers write: the clock runs from one log step to the next, after the queued kernels
have run (`torch.cuda.synchronize`), so the rates are exact over each window of `log_every_n_steps` steps. What a
sample is comes from the module: `samples_in(batch)` where it has one (the name generator counts characters), else
the batch's first dimension. The values are this process's; under DDP every process runs its share.
"""

import time

import torch
from lightning.pytorch import Callback
from typing_extensions import override

from trainrig.monitoring.log_steps import is_log_step

__all__ = ["Throughput"]


def _batch_size(batch) -> int:
    while isinstance(batch, (list, tuple, dict)):
        batch = next(iter(batch.values())) if isinstance(batch, dict) else batch[0]
    return len(batch)


class Throughput(Callback):
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

    @override
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.steps += 1
        if not is_log_step(trainer):
            self.step_end = time.perf_counter()
            return
        on_cuda = pl_module.device.type == "cuda"
        if on_cuda:
            torch.cuda.synchronize(pl_module.device)
        now = time.perf_counter()
        seconds = now - self.window_start
        values = {
            "throughput/samples_per_s": float(self.samples) / seconds,
            "throughput/s_per_step": seconds / self.steps,
            "throughput/between_steps_share": self.between_steps / seconds,
        }
        if on_cuda:
            values["throughput/peak_memory_gib"] = torch.cuda.max_memory_allocated(pl_module.device) / 2**30
        for name, value in values.items():
            pl_module.log(name, value, on_step=True, on_epoch=False)
        self._restart(now)
