"""Real faults at chosen points of a real run, named in a run's config like any callback or plugin.

The signals are sent with os.kill, so they take the same path as one from `kill`, the kubelet or a terminal; the
point is chosen from inside only to make it a given training step instead of a race against a timer.
"""

import os
import signal
from pathlib import Path
from unittest import mock

from lightning.pytorch import Callback

from trainrig.resume import atomic_io
from trainrig.resume.atomic_io import AtomicCheckpointIO


class SignalAtStep(Callback):
    """Sends `signal_name` once global step `step` has finished on global rank `rank`; step 0 when training starts,
    before its first step, when Lightning's signal handlers are installed and the template's not yet.

    `whole_group` sends it to the run's whole process group (every rank of a machine): SIGKILL then is a lost node.
    `to_parent` sends it to the process that started this one.
    Under a launcher that runs ranks as its own tasks, that is the launching client.
    `once_marker`: a file created when the signal is sent, so that a restarted run passing the step again goes on.
    """

    def __init__(
        self,
        step: int,
        signal_name: str = "SIGTERM",
        rank: int = 0,
        whole_group: bool = False,
        to_parent: bool = False,
        once_marker: str | None = None,
    ):
        self.step, self.signal, self.rank = step, signal.Signals[signal_name], rank
        self.whole_group, self.to_parent, self.once_marker = whole_group, to_parent, once_marker

    def on_train_start(self, trainer, pl_module) -> None:
        if self.step == 0:
            self._send(trainer)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step == self.step:
            self._send(trainer)

    def _send(self, trainer) -> None:
        if trainer.global_rank != self.rank:
            return
        if self.once_marker is not None:
            if os.path.exists(self.once_marker):
                return
            open(self.once_marker, "w").close()
        if self.whole_group:
            os.killpg(os.getpgrp(), self.signal)
        else:
            os.kill(os.getppid() if self.to_parent else os.getpid(), self.signal)


def fault(
    step: int,
    signal_name: str,
    rank: int = 0,
    whole_group: bool = False,
    to_parent: bool = False,
    once: Path | None = None,
) -> list[str]:
    """The command-line options that add a `SignalAtStep` to a run."""
    return [
        "--trainer.callbacks+=tests.helpers.faults.SignalAtStep",
        f"--trainer.callbacks.init_args.step={step}",
        f"--trainer.callbacks.init_args.signal_name={signal_name}",
        f"--trainer.callbacks.init_args.rank={rank}",
        f"--trainer.callbacks.init_args.whole_group={whole_group}",
        f"--trainer.callbacks.init_args.to_parent={to_parent}",
        *([f"--trainer.callbacks.init_args.once_marker={once}"] if once is not None else []),
    ]


class _KilledAfter:
    """A file that SIGKILLs its process once `limit` bytes have been written to it."""

    def __init__(self, handle, limit: int):
        self._handle, self._limit, self._written = handle, limit, 0

    def write(self, data) -> int:
        if self._written + len(data) >= self._limit:
            self._handle.write(bytes(data)[: self._limit - self._written])
            self._handle.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        self._written += len(data)
        return self._handle.write(data)

    def __getattr__(self, name):
        return getattr(self._handle, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self._handle.close()


class KilledDuringWrite(AtomicCheckpointIO):
    """The template's checkpoint writer, killed with SIGKILL after `after_bytes` bytes of the `on_save`-th save."""

    def __init__(self, on_save: int = 2, after_bytes: int = 100_000):
        self.on_save, self.after_bytes, self.saves = on_save, after_bytes, 0

    def save_checkpoint(self, checkpoint, path, storage_options=None) -> None:
        self.saves += 1
        if self.saves != self.on_save:
            return super().save_checkpoint(checkpoint, path, storage_options)
        real_open = open

        def killing_open(file, mode="r", *args, **kwargs):
            return _KilledAfter(real_open(file, mode, *args, **kwargs), self.after_bytes)

        with mock.patch.object(atomic_io, "open", killing_open, create=True):
            super().save_checkpoint(checkpoint, path, storage_options)
