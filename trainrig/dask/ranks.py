"""What each rank runs and how the client watches the ranks: the strategy and config every rank gets, their
epoch metrics, waiting for them and stopping them."""

import logging
import time
from datetime import timedelta
from importlib import import_module
from pathlib import Path

from distributed import Client
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.strategies import DDPStrategy

from trainrig.dask.cluster import CLUSTER_TIMEOUT_S, POLL_S
from trainrig.dask.failures import SETTLE_S
from trainrig.dask.worker import (
    DaskRankEnvironment,
    MetricsToClient,
    as_list,
    class_path,
)
from trainrig.errors import UserInputError
from trainrig.resume.latest import names_a_file
from trainrig.strategies.flag import with_launcher_timeout

log = logging.getLogger("trainrig.dask")

# How long the rendezvous and every collective wait for the other ranks when the strategy sets no timeout of its
# own (--trainer.strategy.init_args.timeout): a lost rank fails the run in minutes, not torch's 30.
RANK_TIMEOUT = timedelta(minutes=10)


def rank_strategy(strategy) -> dict:
    """The trainer.strategy entry every rank runs: the chosen DDP-style strategy, with the launcher's timeout unless
    the strategy has its own."""
    entry = with_launcher_timeout(strategy, DDPStrategy, RANK_TIMEOUT)
    strategy_class = import_class(entry["class_path"])
    if not issubclass(strategy_class, DDPStrategy):
        raise UserInputError(
            f"the Dask launcher runs one DDP process per worker; --trainer.strategy {strategy} is not "
            "DDP-based (use ddp or pipeline)"
        )
    # Dask started the processes: a spawn or fork start method would make Lightning start more.
    entry["init_args"].pop("start_method", None)
    if "timeout" not in entry["init_args"]:
        log.warning(f"dask: {strategy_class.__name__} takes no timeout, so a lost rank can leave the others waiting")
    return entry


def import_class(path: str) -> type:
    module_name, _, class_name = path.rpartition(".")
    return getattr(import_module(module_name), class_name)


def check_one_device_per_rank(trainer: dict) -> None:
    """Each Dask worker runs one rank on one device; more devices or nodes would contradict the worker count."""
    if str(trainer.get("devices", "auto")) not in ("auto", "1") or trainer.get("num_nodes", 1) != 1:
        raise UserInputError(
            "with --dask.* every worker runs one rank on one device: set --trainer.devices 1 and --trainer.num_nodes 1 "
            "(or leave them unset) and choose the number of ranks with --dask.n_workers"
        )


def read_local_checkpoint(ckpt_path: str | None) -> bytes | None:
    """The bytes of a --ckpt_path on this machine, which the workers may not see; None leaves the path to them."""
    if not names_a_file(ckpt_path) or not Path(ckpt_path).is_file():
        return None
    return Path(ckpt_path).read_bytes()


def rank_run_config(
    resolved: dict, strategy: dict, world_size: int, topic: str, queue: str, shared_dir: Path | None = None
) -> dict:
    """The config every rank runs: the user's, minus the dask section, as one DDP process per node; its checkpoints in
    `shared_dir` when given."""
    config = {key: value for key, value in resolved.items() if key != "dask"}
    trainer = config["trainer"] = dict(config["trainer"])
    trainer.update(strategy=strategy, devices=1, num_nodes=world_size)
    if shared_dir is not None:
        trainer["callbacks"] = [
            {**callback, "init_args": {**(callback.get("init_args") or {}), "dirpath": str(shared_dir)}}
            if isinstance(callback, dict) and issubclass(import_class(callback["class_path"]), ModelCheckpoint)
            else callback
            for callback in as_list(trainer.get("callbacks"))
        ]
    trainer["plugins"] = [*as_list(trainer.get("plugins")), {"class_path": class_path(DaskRankEnvironment)}]
    trainer["callbacks"] = [
        *as_list(trainer.get("callbacks")),
        {"class_path": class_path(MetricsToClient), "init_args": {"topic": topic, "queue": queue}},
    ]
    return config


def show_metrics(event: tuple[float, dict]) -> None:
    """Print one epoch's metrics from rank 0 (a Dask event) on the client."""
    _, message = event
    values = "  ".join(f"{name} {value:.4g}" for name, value in sorted(message["metrics"].items()))
    where = f"epoch {message['epoch']} step {message['step']}" if message["stage"] == "fit" else message["stage"]
    log.info(f"dask: {where}: {values}")


def wait_for_ranks(client: Client, futures: list, workers: list[str], on_poll=lambda: None) -> set[int]:
    """Block until every rank finished (returns an empty set) or one failed (returns the ranks that failed)."""
    first_failure_at = None
    while True:
        on_poll()
        alive = set(client.nthreads())  # the cheapest way to ask the scheduler which workers it has
        failed = {
            rank
            for rank, (future, worker) in enumerate(zip(futures, workers))
            if future.status in ("error", "cancelled") or (future.status == "pending" and worker not in alive)
        }
        if not failed and all(future.status == "finished" for future in futures):
            return set()
        if failed:
            first_failure_at = first_failure_at or time.monotonic()
            settled = all(future.status == "finished" or rank in failed for rank, future in enumerate(futures))
            if settled or time.monotonic() - first_failure_at >= SETTLE_S:
                return failed
        time.sleep(POLL_S)


def stop_ranks(client: Client, futures: list, workers: list[str], cluster_closes: bool) -> None:
    """Cancel every rank and restart the workers whose rank is still running, unless the cluster closes anyway.

    Cancelling a running task does not stop its thread, which would wait in a collective for the
    failed rank until the timeout.
    """
    alive = set(client.scheduler_info()["workers"])
    still_running = [
        worker for future, worker in zip(futures, workers) if future.status == "pending" and worker in alive
    ]
    client.cancel(futures, force=True)
    if still_running and not cluster_closes:
        log.info(f"dask: restarting workers {still_running}, whose ranks were still running")
        client.restart_workers(still_running, timeout=CLUSTER_TIMEOUT_S, raise_for_error=False)
