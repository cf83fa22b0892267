"""What a rank sends back to the Dask launcher's client, so that nothing relies on a filesystem shared with it.

Rank 0 sends its epoch metrics as Dask events while it trains (`MetricsToClient`), every checkpoint it writes and
its metrics file as they change (`CheckpointsToClient`, `send_small_file`, read by run_files.py on the client), and
at the end its run directory but the checkpoints as bytes (`collect_run_dir`, returned by the task in worker.py).
"""

import os
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path

from lightning.pytorch import Callback, LightningModule, Trainer
from typing_extensions import override

from trainrig.dask.description import first_step_event
from trainrig.resume.atomic_io import AtomicCheckpointIO
from trainrig.resume.csv_logger import ContinuingCSVLogger
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
        if isinstance(logger, ContinuingCSVLogger):  # writes its rows at its interval, or now when flushed
            logger.flush()
        else:
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


CHECKPOINT_SUFFIX = ".ckpt"

# How long rank 0 waits for the client to store a checkpoint before it trains on without that guarantee.
STORED_TIMEOUT_S = 300


# How many bytes of a checkpoint one request of the client's carries: the most of it that the worker, the scheduler
# and the client hold in memory at a time, whatever the checkpoint's size.
PIECE_BYTES = 8 * 2**20

# The checkpoints this worker process holds open for the client to read (`read_piece`), by transfer id. An open file
# keeps the content that was sent, whatever replaces or removes its path meanwhile (the next last.ckpt, a superseded
# best checkpoint); the client closes it once it has the whole file (`close_transfer`).
_sent_checkpoints: dict[str, int] = {}


@dataclass(frozen=True)
class SentFile:
    path: str
    data: bytes = b""
    stored_event: str | None = None  # the Dask event the client sets once the file is on its disk
    removed: bool = False  # the rank deleted the file (a best checkpoint superseded by a better one)
    holder: str | None = None  # a checkpoint: the worker that holds it open for the client to read, in pieces
    transfer: str | None = None  # ... under this id
    size: int = 0  # ... with this many bytes


class CheckpointsToClient(AtomicCheckpointIO):
    """Rank 0's checkpoint writer under the Dask launcher: every file it writes also goes to the client.

    The client keeps the run's checkpoints on its own disk as they are written, so a job resumes after any worker,
    or the whole cluster, is lost, without a filesystem shared with the workers. The file stays open on this worker
    and the client reads it in pieces of `PIECE_BYTES` (`read_piece`), through the scheduler as all of Dask's traffic
    (only a reference passes through a Dask queue): a checkpoint of any size travels with bounded memory on every
    machine, in pieces as plain bytes that nobody unpickles. The save returns once the client has stored the file: a
    checkpoint that training went past is never lost with this worker.
    """

    def __init__(self, queue: str, output_root: str):
        """
        Args:
            queue: the Dask queue the client reads: `SentFile`s, paths relative to `output_root`.
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
        Queue(self.queue, client=client).put(held_for_client(Path(path), relative, stored, get_worker().address))
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


def held_for_client(path: Path, relative_path: str, stored_event: str, holder: str) -> SentFile:
    """Keep the file at `path` open in this worker process (`holder`) until the client has read it: the SentFile that
    tells the client where to read it."""
    transfer = uuid.uuid4().hex
    descriptor = os.open(path, os.O_RDONLY)
    _sent_checkpoints[transfer] = descriptor
    return SentFile(
        relative_path, b"", stored_event, holder=holder, transfer=transfer, size=os.fstat(descriptor).st_size
    )


def read_piece(transfer: str, offset: int, size: int) -> bytes | None:
    """Up to `size` bytes at `offset` of the checkpoint sent as `transfer`, read from disk in this worker's event loop
    (`Client.run`), or None when this worker process does not hold it (a replacement of the one that did)."""
    descriptor = _sent_checkpoints.get(transfer)
    return None if descriptor is None else os.pread(descriptor, size, offset)


def close_transfer(transfer: str) -> None:
    """The client has the whole checkpoint: let go of the file."""
    descriptor = _sent_checkpoints.pop(transfer, None)
    if descriptor is not None:
        os.close(descriptor)


def send_small_file(queue: str, relative_path: str, data: bytes, removed: bool = False) -> None:
    """Through the scheduler itself, where it outlives this worker (a metrics file, kilobytes)."""
    from distributed import Queue, get_client

    Queue(queue, client=get_client()).put(SentFile(relative_path, data, removed=removed))


def collect_run_dir(output_root: Path) -> dict:
    """Every file the run wrote but its checkpoints, which the client received as they were written, as bytes by its
    path under the output root (a logger's own files may sit beside the run's folder), and the run's folder: where
    LightningCLI saved config.yaml."""
    saved_configs = sorted(output_root.rglob("config.yaml"))
    run_dir = saved_configs[0].parent if saved_configs else output_root
    files = {
        path.relative_to(output_root).as_posix(): path.read_bytes()
        for path in sorted(output_root.rglob("*"))
        if path.is_file() and path.suffix != CHECKPOINT_SUFFIX
    }
    return {"run_dir": run_dir.relative_to(output_root).as_posix(), "files": files}
