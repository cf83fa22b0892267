"""The callback every trial runs: rank 0 reports the metric to the driver, and all ranks stop when it prunes.

Reports are made at a trial's progress through its data, in thousandths of an epoch, not at its step count: trials
of a space that varies the batch size validate at different steps, but after the same epochs, so the pruner
compares each with others at the same amount of training data seen.
"""

import math
from importlib import import_module
from pathlib import Path

from lightning.pytorch import Callback
from typing_extensions import override

from trainrig.errors import UserInputError
from trainrig.sweeps import channel as file_channel
from trainrig.sweeps.options import METRIC_NOT_LOGGED, PROGRESS_PER_EPOCH

__all__ = ["ReportToDriver", "progress"]


class ReportToDriver(Callback):
    """Reports `metric` to the sweep driver after every validation and stops the trial when the driver prunes it.

    Args:
        channel: the folder shared with the driver (`trainrig.sweeps.channel`), or the channel's name in `transport`.
        metric: the logged metric the study optimises.
        driver_pid: the driver's process id; a rank 0 on the driver's machine stops waiting when it is gone.
        timeout_s: how long to wait for a decision before training on unpruned.
        transport: a module whose `report_and_wait(channel, step, value, timeout_s)` reaches the driver another
            way, for a rank 0 on a machine without the driver's files; by default files in `channel`.
    """

    def __init__(
        self,
        channel: str,
        metric: str,
        driver_pid: int | None = None,
        timeout_s: float = 600.0,
        transport: str | None = None,
    ):
        self.channel = channel
        self.transport = transport
        self.metric = metric
        self.driver_pid = driver_pid
        self.timeout_s = timeout_s

    @override
    def on_validation_end(self, trainer, pl_module) -> None:
        if trainer.sanity_checking:
            return
        if self.metric not in trainer.callback_metrics:
            logged = ", ".join(sorted(trainer.callback_metrics)) or "nothing"
            raise UserInputError(
                f"--sweep.metric {self.metric} {METRIC_NOT_LOGGED} (step {trainer.global_step}; logged: {logged}); "
                "set --sweep.metric to one of those"
            )
        prune = False
        if trainer.is_global_zero:
            value = float(trainer.callback_metrics[self.metric])
            prune = self._report_and_wait(progress(trainer), value)
        # Every rank stops at the same step, as rank 0 was told.
        if trainer.strategy.broadcast(prune, src=0):
            trainer.should_stop = True

    def _report_and_wait(self, step: int, value: float) -> bool:
        if self.transport is not None:
            return import_module(self.transport).report_and_wait(self.channel, step, value, self.timeout_s)
        return file_channel.report_and_wait(Path(self.channel), step, value, self.driver_pid, self.timeout_s)


def progress(trainer) -> int:
    """How far the trial is through its training data: thousandths of an epoch, whatever its batch size."""
    batches = trainer.num_training_batches
    done = trainer.fit_loop.epoch_loop.batch_progress.current.ready
    fraction = done / batches if batches and not math.isinf(batches) else 1.0
    return round(PROGRESS_PER_EPOCH * (trainer.current_epoch + min(fraction, 1.0)))
