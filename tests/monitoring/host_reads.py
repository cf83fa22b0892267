"""Counting the host reads of device values in each training step, the reads that stall a GPU's queue.

A host read is `aten._local_scalar_dense` (`item()`, `float()`, `bool()`, `if tensor:`, `tolist()`): on a GPU it waits
for every kernel queued before it. `HostReads` counts them over the training steps of a real run, leaving out what
does not touch a GPU's queue: reads while loading data (the loader runs on the host's data) and the optimizer's step
counters (`capturable=False` keeps them on the CPU). `one_hot` is counted as CUDA runs it: on CPU it reads its input's
range to check it, on CUDA it does not. On a GPU (`on_gpu=True`) it counts instead what CUDA itself reports as
synchronizing (`torch.cuda.set_sync_debug_mode`), with the same exceptions.
"""

import json
import math
import sys
import warnings
from contextlib import ExitStack, contextmanager
from pathlib import Path
from unittest import mock

import torch
from lightning.pytorch import Callback
from torch.utils._python_dispatch import TorchDispatchMode
from typing_extensions import override

from tests.helpers.examples import shrink_args
from tests.helpers.runs import ROOT

__all__ = ["LOG_EVERY", "HostReads", "assert_reads_only_at_log_steps", "user_run_args"]

# Reads made while loading data, anywhere below these frames, run on the host's data; so do the reads an optimizer
# makes itself (its CPU step counters), though the training step runs inside `optimizer.step(closure)`.
_LOADING_DATA = ("torch/utils/data/", "/datamodules/", "/litdata/")
_OPTIMIZER = "torch/optim/"
# What stands between the reading code and the counter: torch's dispatch and compile wrappers, warnings' machinery.
_WRAPPERS = ("torch/_compile.py", "torch/_dynamo/", "torch/utils/_python_dispatch.py", "/warnings.py", __file__)
_READ = torch.ops.aten._local_scalar_dense.default


def _from_host_side_code() -> bool:
    frame = sys._getframe(1)
    while frame is not None and any(part in frame.f_code.co_filename for part in _WRAPPERS):
        frame = frame.f_back
    if frame is not None and _OPTIMIZER in frame.f_code.co_filename:
        return True
    while frame is not None:
        if any(part in frame.f_code.co_filename for part in _LOADING_DATA):
            return True
        frame = frame.f_back
    return False


class _ReadCounter(TorchDispatchMode):
    """Counts the host reads made while it is active, except the host-side ones above and `one_hot`'s CPU check."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0
        self.in_one_hot = False

    @override
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is _READ and not self.in_one_hot and not _from_host_side_code():
            self.reads += 1
        return func(*args, **(kwargs or {}))

    @contextmanager
    def counting(self):
        """Active, with `one_hot` (also where torchmetrics imported it by name) flagged while it runs."""
        original = torch.nn.functional.one_hot

        def one_hot(*args, **kwargs):
            self.in_one_hot = True
            try:
                return original(*args, **kwargs)
            finally:
                self.in_one_hot = False

        with ExitStack() as stack:
            stack.enter_context(mock.patch("torch.nn.functional.one_hot", one_hot))
            for module in [module for name, module in sys.modules.items() if name.startswith("torchmetrics")]:
                if module is not None and getattr(module, "one_hot", None) is original:
                    stack.enter_context(mock.patch.object(module, "one_hot", one_hot))
            stack.enter_context(self)
            yield


class _SyncCounter:
    """Counts the synchronizing CUDA calls CUDA reports while it is active, except the host-side ones above."""

    def __init__(self) -> None:
        self.reads = 0

    def _on_warning(self, message, category, filename, lineno, file=None, line=None) -> None:
        if "synchronizing" in str(message) and not _from_host_side_code():
            self.reads += 1

    @contextmanager
    def counting(self):
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.showwarning = self._on_warning
            torch.cuda.set_sync_debug_mode("warn")
            try:
                yield
            finally:
                torch.cuda.set_sync_debug_mode("default")


class HostReads(Callback):
    """Writes the host reads of each training step (its hooks, its logging and the next batch's fetch) as a JSON list
    per epoch to `record` (one file a process); an epoch's last step, which runs validation and the epoch's end, is
    left out."""

    def __init__(self, record: str, on_gpu: bool = False) -> None:
        self.record = Path(record)
        self.counter = _SyncCounter() if on_gpu else _ReadCounter()
        self.active = ExitStack()
        self.epochs: list[list[int]] = []

    @override
    def on_train_epoch_start(self, trainer, pl_module) -> None:
        self.epochs.append([])
        self.active.enter_context(self.counter.counting())

    @override
    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if batch_idx > 0:
            self.epochs[-1].append(self.counter.reads)
        self.counter.reads = 0

    @override
    def on_train_epoch_end(self, trainer, pl_module) -> None:
        self.active.close()

    @override
    def on_train_end(self, trainer, pl_module) -> None:
        record = self.record
        if trainer.world_size > 1:  # each process its own: `reads.json` as `reads.rank1.json`
            record = record.with_name(f"{record.stem}.rank{trainer.global_rank}{record.suffix}")
        record.write_text(json.dumps(self.epochs))


LOG_EVERY = 5
STEPS = 12


def user_run_args(config: str, log_dir, shapes_root, *extra: str) -> list[str]:
    """The config as shipped (progress bar, logger, callbacks), shrunk to `STEPS` steps of one epoch."""
    return [
        *("--config", str(ROOT / "configs" / config)),
        *("--trainer.max_epochs", "1", "--trainer.limit_train_batches", str(STEPS)),
        *("--trainer.limit_val_batches", "2", "--trainer.log_every_n_steps", str(LOG_EVERY)),
        *("--trainer.logger.init_args.save_dir", str(log_dir)),
        *shrink_args(config, shapes_root),
        *("--data.init_args.batch_size", "2"),  # steps enough for a few log steps from the small data
        *extra,
    ]


def assert_reads_only_at_log_steps(run: str, reads: list[int]) -> None:
    """At most one step in `LOG_EVERY` of `reads` (a step's count each) read, and those `LOG_EVERY` apart."""
    reading = [step for step, count in enumerate(reads) if count]
    print(f"{run}: {len(reading)} of {len(reads)} steps read, {sum(reads) / len(reads):.1f} reads a step: {reads}")
    assert len(reading) <= math.ceil(len(reads) / LOG_EVERY), f"steps reading device values on the host: {reads}"
    assert all(later - earlier >= LOG_EVERY for earlier, later in zip(reading, reading[1:])), reads
