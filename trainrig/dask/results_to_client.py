"""What a rank sends back to the Dask launcher's client, so that nothing relies on a filesystem shared with it.

Rank 0 sends its epoch metrics as Dask events while it trains (`MetricsToClient`), every checkpoint it writes and
its metrics file as they change (`CheckpointsToClient`, `send_small_file`, read by run_files.py on the client), and
at the end its run directory as bytes (`collect_run_dir`, returned by the task in worker.py).
"""

import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path

from lightning.pytorch import Callback, LightningModule, Trainer
from typing_extensions import override

from trainrig.dask.description import first_step_event
from trainrig.resume.atomic_io import AtomicCheckpointIO
from trainrig.resume.run_directory import METRICS_FILE


class MetricsToClient(Callback):
    """Sends global rank 0's metrics to the launching client: each epoch's as a Dask event, to print, and the
    metrics file after every checkpoint, so that the client's copy reaches the step a restart resumes from."""

    def __init__(self, topic: str, queue: str | None = None):
        """
        Args:
            topic: the Dask event topic the client listens to for this run.
            queue: the Dask queue the client reads files from (see CheckpointsToClient).
        """
        self.topic, self.queue = topic, queue
        self._checkpoint_saved = False
        self._stepped = False

    @override
    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._send(trainer, "fit")

    @override
    def on_validation_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if trainer.state.fn == "validate":
            self._send(trainer, "validate")

    @override
    def on_test_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._send(trainer, "test")

    @override
    def on_save_checkpoint(self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict) -> None:
        """Lightning logs the step's metrics after its checkpoint: send the file once they are in, at the next hook."""
        self._checkpoint_saved = True

    @override
    def on_train_batch_start(self, trainer: Trainer, pl_module: LightningModule, batch, batch_idx: int) -> None:
        self._send_metrics_file(trainer)

    @override
    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs, batch, batch_idx: int) -> None:
        """Tell the client once that training got past its first step: a failure after it may heal on a restart."""
        if self._stepped or not trainer.is_global_zero:
            return
        from distributed import Event, get_client

        Event(first_step_event(self.topic), client=get_client()).set()
        self._stepped = True

    @override
    def on_train_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._send_metrics_file(trainer)

    @override
    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._send_metrics_file(trainer)

    def _send_metrics_file(self, trainer: Trainer) -> None:
        logger = trainer.logger
        if not self._checkpoint_saved or not trainer.is_global_zero or self.queue is None:
            return
        self._checkpoint_saved = False
        if logger is None or logger.log_dir is None or logger.save_dir is None:
            return
        logger.save()
        metrics = Path(logger.log_dir) / METRICS_FILE
        if metrics.is_file():
            send_small_file(self.queue, metrics.relative_to(logger.save_dir).as_posix(), metrics.read_bytes())

    def _send(self, trainer: Trainer, stage: str) -> None:
        if not trainer.is_global_zero:
            return
        from distributed import get_worker

        metrics = {name: float(value) for name, value in trainer.callback_metrics.items() if value.numel() == 1}
        get_worker().log_event(
            self.topic,
            {"stage": stage, "epoch": trainer.current_epoch, "step": trainer.global_step, "metrics": metrics},
        )


# How long rank 0 waits for the client to store a checkpoint before it trains on without that guarantee.
STORED_TIMEOUT_S = 300


@dataclass(frozen=True)
class SentFile:
    path: str
    data: bytes
    stored_event: str | None = None  # the Dask event the client sets once the file is on its disk
    removed: bool = False  # the rank deleted the file (a best checkpoint superseded by a better one)


class CheckpointsToClient(AtomicCheckpointIO):
    """Rank 0's checkpoint writer under the Dask launcher: every file it writes also goes to the client.

    The client keeps the run's checkpoints on its own disk as they are written, so a job resumes after any worker,
    or the whole cluster, is lost, without a filesystem shared with the workers. The bytes stay on this worker
    until the client fetches them (only a reference passes through the scheduler, in a Dask queue), and the save
    returns once the client has stored them: a checkpoint that training went past is never lost with this worker.
    """

    def __init__(self, queue: str, output_root: str):
        """
        Args:
            queue: the Dask queue the client reads: `SentFile`s or futures of them, paths relative to `output_root`.
            output_root: the worker-side directory the paths are relative to.
        """
        super().__init__()
        self.queue, self.output_root = queue, output_root

    @override
    def save_checkpoint(self, checkpoint, path, storage_options=None) -> None:
        super().save_checkpoint(checkpoint, path, storage_options)
        from distributed import Event, Queue, get_client, get_worker

        client = get_client()
        relative = Path(path).resolve().relative_to(Path(self.output_root).resolve()).as_posix()
        stored = f"{self.queue}-stored-{uuid.uuid4().hex}"
        # A queue carries a future only as a whole element, so the path travels inside the scattered data, which
        # stays on this worker: no other worker, which may be the one that just died, is involved.
        sent = client.scatter(SentFile(relative, Path(path).read_bytes(), stored), workers=[get_worker().address])
        Queue(self.queue, client=client).put(sent)
        if not Event(stored, client=client).wait(timeout=STORED_TIMEOUT_S):
            warnings.warn(
                f"the client did not store {relative} within {STORED_TIMEOUT_S} s; training goes on", stacklevel=2
            )

    @override
    def remove_checkpoint(self, path) -> None:
        """The client's copy goes too, in order with the saves: its run directory keeps what this rank keeps."""
        super().remove_checkpoint(path)
        relative = Path(path).resolve().relative_to(Path(self.output_root).resolve()).as_posix()
        send_small_file(self.queue, relative, b"", removed=True)


def send_small_file(queue: str, relative_path: str, data: bytes, removed: bool = False) -> None:
    """Through the scheduler itself, where it outlives this worker (a metrics file, kilobytes)."""
    from distributed import Queue, get_client

    Queue(queue, client=get_client()).put(SentFile(relative_path, data, removed=removed))


def collect_run_dir(output_root: Path) -> dict:
    """Every file the run wrote, as bytes by its path under the output root (a logger's own files may sit beside
    the run's folder), and the run's folder: where LightningCLI saved config.yaml."""
    saved_configs = sorted(output_root.rglob("config.yaml"))
    run_dir = saved_configs[0].parent if saved_configs else output_root
    files = {
        path.relative_to(output_root).as_posix(): path.read_bytes()
        for path in sorted(output_root.rglob("*"))
        if path.is_file()
    }
    return {"run_dir": run_dir.relative_to(output_root).as_posix(), "files": files}
