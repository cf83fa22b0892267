"""The part of the Dask launcher that runs inside each Dask worker: one DDP rank of the usual cli.py run.

The launcher pins one `run_rank` task to each worker, with the run's description (description.py). The task sets
the rank's environment (rank_environment.py), points every output at a worker-local temporary directory and runs
cli.py on the config the description gives this rank. Rank 0 sends its metrics and checkpoints to the client while it
trains and returns its run directory as bytes (results_to_client.py), so nothing relies on a filesystem shared with
the client. Nothing here is the client's: it imports this module only to name the task (by reference:
`trainrig.dask.worker.run_rank`).
"""

import signal
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from trainrig.dask.description import RunDescription
from trainrig.dask.rank_environment import DaskRankEnvironment, set_rank_environment
from trainrig.dask.results_to_client import CheckpointsToClient, MetricsToClient, collect_run_dir
from trainrig.registry import import_object
from trainrig.resume.preemption import Preempted, install_stop_handlers, request_stop, restore_handlers

# The input config lives outside the output root: a run without a logger writes config.yaml to its root.
LAUNCH_CONFIG = "launch.yaml"
OUTPUT_ROOT = "output"
CHECKPOINT_FILE = "resume.ckpt"


def run_rank(description: RunDescription, rank: int, checkpoint: bytes | None = None) -> dict:
    """Run the described job as global rank `rank` of the description's attempt; returns {"preempted": bool}, and
    rank 0 its run directory as "run_dir", "files".

    `checkpoint`: the bytes of the client's checkpoint the attempt resumes from, scattered to every worker once
    rather than sent with each rank's description. A stop request (SIGTERM or SIGINT to this worker process, or the
    client setting the attempt's stop event) makes every rank checkpoint at its next step and return with
    "preempted" set.
    """
    attempt = description.attempt
    set_rank_environment(attempt, rank)
    run_job = import_object(description.job)
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
