"""`last.ckpt` at an interval, at every epoch end and on preemption, with the one before kept as `previous.ckpt`."""

import os
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities import rank_zero_info
from typing_extensions import override

from trainrig.errors import UserInputError
from trainrig.resume.atomic_io import write_checkpoint_atomically
from trainrig.resume.csv_logger import ContinuingCSVLogger, metrics_rows
from trainrig.resume.loading import load_checkpoint
from trainrig.resume.preemption import (
    AgreedFlags,
    Preempted,
    StopSignals,
    clear_stop_request,
    take_over_a_sigterm_lightning_received,
)
from trainrig.resume.sharded import METADATA_NAME, PARTIAL_SUFFIX, hidden_sibling, replace_path

LAST_NAME, PREVIOUS_NAME = "last.ckpt", "previous.ckpt"
# In the checkpoint of a run that ended at `max_steps` in the middle of an epoch: how many metrics.csv rows it had
# logged by then, before Lightning ended the epoch early (trainrig/resume/latest.py keeps only those on resume).
METRICS_ROWS_KEY = "metrics_rows"


class ResumableCheckpoint(ModelCheckpoint):
    """The checkpoint `--ckpt_path last` resumes from.

    Writes `last.ckpt` every `every_n_train_steps` steps or `train_time_interval` of training (one of them), at the
    end of every training epoch, and when SIGTERM or SIGINT reaches any rank: then every rank saves at the same step
    and exits with status 143. With several processes, a stop request and a rank's clock passing the interval reach
    every rank one step later (`AgreedFlags`), instead of through collectives that every step waits for (Lightning's
    `ModelCheckpoint` broadcasts rank 0's clock at every step). Before `last.ckpt` is replaced,
    the file it replaces stays as `previous.ckpt` (a hard link, no copy), the fallback when `last.ckpt` turns out
    to be damaged. Selecting the best model by a metric is a separate `ModelCheckpoint`.

    An epoch-end `last.ckpt` holds the epoch's end as the uninterrupted run goes on from it: this callback saves
    after every other callback has handled the epoch's end (the best-model tracker included). Lightning steps
    epoch-level plateau schedulers after those hooks, and skips that step both when it resumes from such a
    checkpoint and at the end of an epoch it resumed in the middle of; this callback takes the skipped step (with
    the metric value saved in the checkpoint in the first case).

    A run whose `max_steps` ends it in the middle of an epoch saves `last.ckpt` after its last step, as a stop there
    would: Lightning then ends the epoch early (its end hooks, its aggregates logged over part of it), which a run to a
    larger `max_steps` does not, so that run, continued with a larger `max_steps`, goes on as the longer run would
    have. Its checkpoint records how many metrics rows came before the early epoch end (`METRICS_ROWS_KEY`).
    """

    CHECKPOINT_NAME_LAST = "last"

    def __init__(
        self,
        dirpath: str | None = None,
        every_n_train_steps: int | None = None,
        train_time_interval: timedelta | None = None,
    ):
        """
        Args:
            dirpath: default: `checkpoints/` in the run's log directory.
            every_n_train_steps: save every this many optimizer steps.
            train_time_interval: or save when this much training time has passed since the last save, e.g. "0:05:00".
        """
        super().__init__(
            dirpath=dirpath,
            save_last=True,
            save_top_k=0,
            every_n_train_steps=every_n_train_steps,
            train_time_interval=train_time_interval,
            save_on_train_epoch_end=True,
            enable_version_counter=False,
        )
        self._steps_between_saves = every_n_train_steps or 0
        self._seconds_between_saves = train_time_interval.total_seconds() if train_time_interval is not None else None
        self._last_save_time = 0.0  # set when training starts
        self._stop_signals = StopSignals()
        self._agreed = AgreedFlags()  # [stop requested, save interval passed] on any rank
        self._stop: str | None = None  # "now" or "after epoch" once a stop signal reached any rank
        self._saved_for_stop = False
        self._ended_mid_epoch = False  # `max_steps` reached before the epoch's last batch
        self._plateau_step_due: dict | None = None  # from a resumed epoch-end checkpoint: {"epoch", "monitored"}

    @override
    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        super().setup(trainer, pl_module, stage)
        # Last of all callbacks, so that the state it saves at an epoch's end has every other callback's update.
        # A new list: the hook loop running now keeps iterating the old one.
        trainer.callbacks = [callback for callback in trainer.callbacks if callback is not self] + [self]

    @override
    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        # Lightning installs its own handlers when the run starts; this comes later and replaces them.
        self._stop_signals.install()
        take_over_a_sigterm_lightning_received(trainer)
        self._agreed.open(trainer.world_size)
        self._last_save_time = time.monotonic()
        due, self._plateau_step_due = self._plateau_step_due, None
        if due is not None and trainer.current_epoch == due["epoch"] + 1:
            step_plateau_schedulers(trainer, pl_module, due["epoch"], due["monitored"])

    @override
    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "plateau_step_due": self._plateau_step_due}

    @override
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        self._plateau_step_due = state_dict.get("plateau_step_due")

    @override
    def teardown(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        self._stop_signals.restore()
        self._agreed.close()
        clear_stop_request()

    @override
    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs, batch, batch_idx: int) -> None:
        if self._stop is not None:
            return
        last_batch = trainer.fit_loop.epoch_loop.batch_progress.is_last_batch
        stop, interval_passed = self._agreed.receive(self._local_flags(), settle=last_batch)
        if stop:
            # After an epoch's last batch come validation and the epoch's end; the checkpoint that follows them
            # keeps what they change (a plateau scheduler, the best score). A long validation delays the stop.
            self._stop = "after epoch" if last_batch else "now"
            if self._stop == "now":
                self._save_and_report(trainer)
            return
        if last_batch:
            return  # the epoch's end saves once validation and every epoch-end update are done
        steps_due = self._steps_between_saves > 0 and trainer.global_step % self._steps_between_saves == 0
        self._ended_mid_epoch = trainer.max_steps != -1 and trainer.global_step >= trainer.max_steps
        if interval_passed or steps_due or self._ended_mid_epoch:
            self.save_resume_point(trainer)
        self._agreed.send(self._local_flags())  # after the save, which restarts the interval

    def _local_flags(self) -> list[bool]:
        """This process's [stop requested, save interval passed], for `AgreedFlags`."""
        interval, since_save = self._seconds_between_saves, time.monotonic() - self._last_save_time
        return [self._stop_signals.received is not None, interval is not None and since_save >= interval]

    # A stop raises in the next hook, once Lightning has logged the step the checkpoint ends with.
    @override
    def on_train_batch_start(self, trainer: Trainer, pl_module: LightningModule, batch, batch_idx: int) -> None:
        self._raise_if_stopped()

    @override
    def on_validation_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._raise_if_stopped()

    @override
    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._raise_if_stopped()
        if self._stop == "after epoch":
            self._save_and_report(trainer, epoch_end=True)
            return
        if self._ended_mid_epoch:  # the checkpoint after the last step stays the run's resume point
            self._record_metrics_rows(trainer)
            return
        self.save_resume_point(trainer, epoch_end=True)
        if trainer.fit_loop.restarting:  # resumed within this epoch: Lightning will not step them
            due = plateau_step_due(trainer)
            if due is not None:
                step_plateau_schedulers(trainer, pl_module, due["epoch"], due["monitored"])

    # After an epoch-end save, every rank first finishes the epoch's metrics (collectives), then stops.
    @override
    def on_train_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._raise_if_stopped()

    @override
    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._raise_if_stopped()

    def _save_and_report(self, trainer: Trainer, epoch_end: bool = False) -> None:
        self.save_resume_point(trainer, epoch_end)
        self._saved_for_stop = True
        received = self._stop_signals.received
        cause = received.name if received is not None else "a signal to another rank"
        rank_zero_info(
            f"preempted at step {trainer.global_step} by {cause}: saved {self.last_model_path}; "
            f"exiting with status {Preempted().code}, resume with --ckpt_path last"
        )

    def _record_metrics_rows(self, trainer: Trainer) -> None:
        """Adds to `last.ckpt` (a sharded one's `meta.pt`) how many metrics rows the run has logged: all but those of
        the early epoch end, which Lightning logs next."""
        logger = next((logger for logger in trainer.loggers if isinstance(logger, ContinuingCSVLogger)), None)
        if logger is None or not trainer.is_global_zero:
            return
        logger.flush()
        last = Path(self.last_model_path)
        target = last / METADATA_NAME if last.is_dir() else last
        try:
            checkpoint = load_checkpoint(target)
        except UserInputError:  # state that only `--weights_only false` loads: resuming it says so in one line
            return
        checkpoint[METRICS_ROWS_KEY] = metrics_rows(Path(logger.experiment.metrics_file_path))
        write_checkpoint_atomically(target, checkpoint)

    def _raise_if_stopped(self) -> None:
        if self._saved_for_stop:
            raise Preempted

    def save_resume_point(self, trainer: Trainer, epoch_end: bool = False) -> None:
        """`epoch_end`: saved even when this step was saved already, since validation and the epoch's end came after."""
        if trainer.fast_dev_run or trainer.state.fn != TrainerFn.FITTING or trainer.sanity_checking:
            return
        if self._last_global_step_saved == trainer.global_step and not epoch_end:
            return
        self._plateau_step_due = plateau_step_due(trainer) if epoch_end else None
        try:
            self._save_last_checkpoint(trainer, self._monitor_candidates(trainer))
        finally:
            self._plateau_step_due = None
        self._last_save_time = time.monotonic()

    @override
    def _save_checkpoint(self, trainer: Trainer, filepath: str) -> None:
        target = Path(filepath)
        if trainer.is_global_zero:
            keep_as_previous(target)
        super()._save_checkpoint(trainer, filepath)


def plateau_step_due(trainer: Trainer) -> dict | None:
    """The values the epoch-level plateau schedulers step on once this epoch's end hooks are done."""
    monitored = {
        config.monitor: trainer.callback_metrics[config.monitor].item()
        for config in trainer.lr_scheduler_configs
        if config.reduce_on_plateau and config.interval == "epoch" and config.monitor in trainer.callback_metrics
    }
    return {"epoch": trainer.current_epoch, "monitored": monitored} if monitored else None


def step_plateau_schedulers(trainer: Trainer, pl_module: LightningModule, epoch: int, monitored: dict) -> None:
    """The epoch-end step of plateau schedulers, as Lightning's fit loop takes it (`_update_learning_rates`)."""
    scheduler_progress = trainer.fit_loop.epoch_loop.scheduler_progress
    for config in trainer.lr_scheduler_configs:
        if (
            config.reduce_on_plateau
            and config.interval == "epoch"
            and (epoch + 1) % config.frequency == 0
            and config.monitor in monitored
        ):
            scheduler_progress.increment_ready()
            pl_module.lr_scheduler_step(config.scheduler, monitored[config.monitor])
            scheduler_progress.increment_completed()


def keep_as_previous(last: Path) -> None:
    """Before `last.ckpt` is replaced, give its content the name `previous.ckpt` too: a file as a hard link,
    atomically; a sharded checkpoint directory by renaming it (until the new `last.ckpt` is in place, `previous.ckpt`
    is the newest checkpoint, which `--ckpt_path last` falls back to)."""
    if last.name != LAST_NAME:
        return
    previous = last.with_name(PREVIOUS_NAME)
    if last.is_dir():
        replace_path(last, previous)
        return
    if not last.is_file():
        return
    staging = hidden_sibling(previous, PARTIAL_SUFFIX)
    staging.unlink(missing_ok=True)
    try:
        os.link(last, staging)
    except OSError:  # a filesystem without hard links
        return
    replace_path(staging, previous)
