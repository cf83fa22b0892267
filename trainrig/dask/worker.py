"""The part of the Dask launcher that runs inside each Dask worker: one DDP rank of the usual cli.py run.

The launcher pins one `run_rank` task to each worker, with the run's description (description.py). The task sets
the rank's environment, points every output at a worker-local temporary directory and runs cli.py on the config the
description gives this rank. Rank 0 sends its epoch metrics to the client while it trains and returns its run
directory as bytes, so nothing relies on a filesystem shared with the client. Nothing here is the client's: it
imports this module only to name the task.
"""

import importlib
import os
import signal
import sys
import tempfile
import threading
import uuid
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml
from lightning.fabric.plugins.environments import ClusterEnvironment
from lightning.pytorch import Callback, LightningModule, Trainer
from typing_extensions import override

from trainrig.dask.description import RunDescription, first_step_event
from trainrig.resume.atomic_io import AtomicCheckpointIO
from trainrig.resume.preemption import Preempted, install_stop_handlers, request_stop, restore_handlers
from trainrig.resume.run_directory import METRICS_FILE

# The input config lives outside the output root: a run without a logger writes config.yaml to its root.
LAUNCH_CONFIG = "launch.yaml"
OUTPUT_ROOT = "output"
CHECKPOINT_FILE = "resume.ckpt"


class DaskRankEnvironment(ClusterEnvironment):
    """Rank and world size as the launcher's task set them: Dask started the process, one rank per worker.

    Without it Lightning, seeing no LOCAL_RANK, would launch processes itself and every worker would
    believe it is global rank 0.
    """

    @property
    def creates_processes_externally(self) -> bool:
        return True

    @property
    def main_address(self) -> str:
        return os.environ["MASTER_ADDR"]

    @property
    def main_port(self) -> int:
        return int(os.environ["MASTER_PORT"])

    @staticmethod
    def detect() -> bool:
        """Never picked automatically: the launcher passes it as a trainer plugin."""
        return False

    def world_size(self) -> int:
        return int(os.environ["WORLD_SIZE"])

    def set_world_size(self, size: int) -> None:
        """The launcher fixed the world size; Lightning's num_nodes x devices equals it."""

    def global_rank(self) -> int:
        return int(os.environ["RANK"])

    def set_global_rank(self, rank: int) -> None:
        """The launcher fixed the rank."""

    def local_rank(self) -> int:
        return 0

    def node_rank(self) -> int:
        return self.global_rank()


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

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._send(trainer, "fit")

    def on_validation_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if trainer.state.fn == "validate":
            self._send(trainer, "validate")

    def on_test_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._send(trainer, "test")

    def on_save_checkpoint(self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict) -> None:
        """Lightning logs the step's metrics after its checkpoint: send the file once they are in, at the next hook."""
        self._checkpoint_saved = True

    def on_train_batch_start(self, trainer: Trainer, pl_module: LightningModule, batch, batch_idx: int) -> None:
        self._send_metrics_file(trainer)

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs, batch, batch_idx: int) -> None:
        """Tell the client once that training got past its first step: a failure after it may heal on a restart."""
        if self._stepped or not trainer.is_global_zero:
            return
        from distributed import Event, get_client

        Event(first_step_event(self.topic), client=get_client()).set()
        self._stepped = True

    def on_train_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._send_metrics_file(trainer)

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


def resolve_job(reference: str) -> Callable[[list[str]], None]:
    module, _, name = reference.partition(":")
    return getattr(importlib.import_module(module), name)


def run_rank(description: RunDescription, rank: int, checkpoint: bytes | None = None) -> dict:
    """Run the described job as global rank `rank` of the description's attempt; returns {"preempted": bool}, and
    rank 0 its run directory as "run_dir", "files".

    `checkpoint`: the bytes of the client's checkpoint the attempt resumes from, scattered to every worker once
    rather than sent with each rank's description. A stop request (SIGTERM or SIGINT to this worker process, or the
    client setting the attempt's stop event) makes every rank checkpoint at its next step and return with
    "preempted" set.
    """
    attempt = description.attempt
    os.environ.update(
        MASTER_ADDR=attempt.main_address,
        MASTER_PORT=str(attempt.main_port),
        RANK=str(rank),
        WORLD_SIZE=str(attempt.world_size),
        LOCAL_RANK="0",
    )
    # Lightning reads the rank for its rank-zero-only logging once, at import, which may have happened in an earlier
    # task.
    from lightning_utilities.core.rank_zero import rank_zero_only

    rank_zero_only.rank = rank

    run_job = resolve_job(description.job)
    # Inside the worker's own Dask directory: a rank killed with its worker cannot remove its folder, and the worker
    # the nanny starts in its place purges the dead worker's directory, this folder with it.
    from distributed import get_worker

    workdir_parent = get_worker().local_directory
    with tempfile.TemporaryDirectory(prefix=f"dask-rank{rank}-attempt{attempt.number}-", dir=workdir_parent) as workdir:
        output_root = Path(workdir) / OUTPUT_ROOT
        checkpoint_file = Path(workdir) / CHECKPOINT_FILE if checkpoint is not None else None
        if checkpoint_file is not None:
            checkpoint_file.write_bytes(checkpoint)
        plugins = [class_entry(DaskRankEnvironment)]
        if description.shared_dir is None and rank == 0:  # else the checkpoints are in the shared directory
            plugins.append(
                class_entry(CheckpointsToClient, queue=attempt.checkpoint_queue, output_root=str(output_root))
            )
        callbacks = [class_entry(MetricsToClient, topic=attempt.topic, queue=attempt.checkpoint_queue)]
        config = description.rank_config(output_root, plugins, callbacks, checkpoint_file)
        launch_config = Path(workdir) / LAUNCH_CONFIG
        launch_config.write_text(yaml.safe_dump(config, sort_keys=False))
        # LightningCLI warns when it is given `args` while the process has command-line arguments (the worker's own).
        worker_argv, sys.argv = sys.argv, sys.argv[:1]
        preempted = False
        try:
            with forwarded_stop_requests(attempt.stop_event):
                run_job([description.subcommand, "--config", str(launch_config)])
        except Preempted:
            preempted = True
        finally:
            sys.argv = worker_argv
        return {"preempted": preempted, **(collect_run_dir(output_root) if rank == 0 else {})}


@contextmanager
def forwarded_stop_requests(stop_event: str) -> Iterator[None]:
    """Turn SIGTERM/SIGINT to this worker process, or the client's stop event, into a stop request for the training.

    The training runs in a task thread, where signal handlers cannot be set: they go to the main thread, which runs
    the worker's event loop, for as long as the task runs.
    """
    from distributed import Event, get_client, get_worker

    worker, client = get_worker(), get_client()
    previous: dict = {}
    installed = threading.Event()

    def install() -> None:
        previous.update(install_stop_handlers())
        installed.set()

    worker.loop.add_callback(install)
    installed.wait(timeout=10)
    finished = threading.Event()

    def watch() -> None:
        event = Event(stop_event, client=client)
        while not finished.is_set():
            try:
                stop = event.wait(timeout=1)
            except OSError:  # the scheduler is gone: the run is ending anyway
                return
            if stop:
                request_stop(signal.SIGTERM)
                finished.wait(timeout=1)

    watcher = threading.Thread(target=watch, name="dask-stop-watcher", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        finished.set()
        watcher.join(timeout=5)
        worker.loop.add_callback(restore_handlers, previous)


def class_entry(cls: type, **init_args) -> dict:
    """The config entry from which LightningCLI builds `cls(**init_args)`."""
    return {"class_path": f"{cls.__module__}.{cls.__qualname__}", **({"init_args": init_args} if init_args else {})}


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
