"""`--dask.n_workers N` / `--dask.address tcp://HOST:8786`: the same cli.py run as DDP over the workers of a Dask
cluster.

The client (this process) only parses the config. It pins one `worker.run_rank` task to each
worker, and each task runs cli.py as one DDP rank. While they train, rank 0's epoch metrics arrive
here as Dask events; at the end rank 0's run directory (metrics, checkpoints) comes back as bytes
and is written to this machine's log directory. A task that raises or a worker that dies stops the
run: the client names the rank, the worker and the cause, cancels the rest and exits non-zero.
"""

import logging
import os
import sys
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import yaml
from distributed import Client, Event
from distributed.comm import get_address_host
from distributed.utils import open_port

from trainrig.dask import DaskOptions
from trainrig.dask.cluster import CLUSTER_TIMEOUT_S, chosen_workers, connected_client, stop_requests_forwarded
from trainrig.dask.failures import RankFailure, recorded_worker_deaths
from trainrig.dask.ranks import (
    check_one_device_per_rank,
    rank_run_config,
    rank_strategy,
    read_local_checkpoint,
    show_metrics,
    stop_ranks,
    wait_for_ranks,
)
from trainrig.dask.run_files import CheckpointReceiver, pin_run_version, write_run_dir
from trainrig.dask.worker import (
    first_step_event,
    job_reference,
    run_rank,
)
from trainrig.errors import UserInputError
from trainrig.resume.preemption import Preempted
from trainrig.resume.run_directory import output_root as client_output_root
from trainrig.resume.run_directory import run_folder

log = logging.getLogger("trainrig.dask")
log.setLevel(logging.INFO)
if not logging.getLogger().hasHandlers():
    log.addHandler(logging.StreamHandler(sys.stdout))
    log.propagate = False

# See DaskOptions.max_restarts.
EMBEDDED_MAX_RESTARTS = 1

EXISTING_MAX_RESTARTS = 3


def launch(job: Callable[[list[str]], None], subcommand: str, resolved: dict) -> None:
    """Run `job([subcommand, "--config", FILE])` on every rank, on the Dask cluster the config's `dask` section names.

    A failure that a retry can fix starts every rank again from the newest checkpoint, up to `max_restarts` times.

    Args:
        job: the entry point each rank runs (cli.py's `run`), sent to the workers by reference.
        resolved: the subcommand's whole parsed config as plain data, as `--print_config` shows it.
    """
    options = DaskOptions(**resolved["dask"])
    config_text = yaml.safe_dump(resolved, sort_keys=False)  # before the run's version is pinned below
    check_options(options)
    output_root = client_output_root(resolved["trainer"])
    pin_run_version(resolved, output_root)
    strategy = rank_strategy(resolved["trainer"].get("strategy", "auto"))
    check_one_device_per_rank(resolved["trainer"])
    checkpoint = read_local_checkpoint(resolved.get("ckpt_path"))
    # The run's checkpoints in the shared directory, in the run's own folder: another run never overwrites them.
    shared_dir = (
        Path(options.checkpoint_dir) / run_folder(resolved["trainer"]) / "checkpoints"
        if options.checkpoint_dir is not None
        else None
    )
    if shared_dir is not None and resolved.get("ckpt_path") is not None:
        checkpoint = resolved["ckpt_path"]  # resolved in the shared directory, which the ranks read themselves

    with ExitStack() as stack:
        client, embedded = stack.enter_context(connected_client(options))
        death_reasons = stack.enter_context(recorded_worker_deaths())
        if options.restart:
            log.info("dask: restarting the cluster's workers")
            client.restart(timeout=CLUSTER_TIMEOUT_S)
        max_restarts = options.max_restarts
        if max_restarts is None:
            max_restarts = EMBEDDED_MAX_RESTARTS if embedded else EXISTING_MAX_RESTARTS
        ranks, previous_cause = None, None
        for restart in range(max_restarts + 1):
            workers = chosen_workers(client, options, ranks)
            ranks = ranks or len(workers)
            receiver = CheckpointReceiver(client, output_root, shared_dir)
            try:
                results = run_attempt(job, subcommand, resolved, strategy, client, workers, checkpoint, receiver)
            except RankFailure as failure:
                cause = failure.cause(death_reasons)
                # Failing again the same way before any training step: a restart would only repeat it.
                repeated = not failure.stepped and cause == previous_cause
                last = restart == max_restarts or failure.user_error is not None or repeated
                # Read before cancelling changes what it reads; a user error needs its one line, no traceback.
                report = failure.report(death_reasons, tracebacks=last and failure.user_error is None)
                stop_ranks(client, failure.futures, workers, cluster_closes=embedded and last)
                if failure.user_error is not None:  # bad input fails the same way every time
                    raise failure.user_error from None
                if repeated:
                    raise SystemExit(
                        f"error: the Dask run stopped: {report} (again before the first training step, as in the "
                        "attempt before: a restart does not heal it)"
                    ) from None
                if last:
                    restarts = f" after {max_restarts} restart(s)" if max_restarts else ""
                    raise SystemExit(f"error: the Dask run stopped{restarts}: {report}") from None
                previous_cause = cause
                checkpoint, step = receiver.resume_point(checkpoint)
                resumed = f"resuming at step {step}" if step is not None else "from the start: no checkpoint yet"
                log.info(f"dask: {report}; restart {restart + 1} of {max_restarts}, {resumed}")
                continue
            destination = write_run_dir(results[0], output_root, config_text, receiver.metrics_bases)
            log.info(f"dask: rank 0's results are in {destination}")
            if any(result["preempted"] for result in results):
                log.info(
                    f"dask: stopped with a checkpoint in {shared_dir or destination / 'checkpoints'}; "
                    "the same command with --ckpt_path last continues the run"
                )
                raise Preempted
            return


def check_options(options: DaskOptions) -> None:
    for name in ("n_workers", "min_workers"):
        if getattr(options, name) is not None and getattr(options, name) < 1:
            raise UserInputError(f"--dask.{name} must be at least 1, got {getattr(options, name)}")
    if options.max_restarts is not None and options.max_restarts < 0:
        raise UserInputError(f"--dask.max_restarts must be 0 or more, got {options.max_restarts}")
    for name in ("min_workers", "workers"):
        if getattr(options, name) is not None and options.address is None:
            raise UserInputError(f"--dask.{name} applies to an existing cluster (--dask.address)")
    if options.workers is not None:
        if not options.workers or len(set(options.workers)) != len(options.workers):
            raise UserInputError(f"--dask.workers must name distinct workers, got {options.workers}")
        if options.n_workers is not None and options.n_workers != len(options.workers):
            raise UserInputError(
                f"--dask.n_workers {options.n_workers} disagrees with the {len(options.workers)} --dask.workers"
            )


def run_attempt(
    job: Callable,
    subcommand: str,
    resolved: dict,
    strategy: dict,
    client: Client,
    workers: list[str],
    checkpoint: bytes | str | None,
    receiver: "CheckpointReceiver",
) -> list[dict]:
    """Run every rank once: their results, or a RankFailure with the ranks still pinned to their workers."""
    pids = client.run(os.getpid, workers=workers)
    main_address = get_address_host(workers[0])
    main_port = client.submit(open_port, workers=[workers[0]], pure=False, allow_other_workers=False).result(
        timeout=CLUSTER_TIMEOUT_S
    )
    for rank, worker in enumerate(workers):
        log.info(f"dask: rank {rank} on worker {worker} (pid {pids[worker]})")

    topic = f"lightning-dask-{uuid.uuid4().hex}"
    client.subscribe_topic(topic, show_metrics)
    config = rank_run_config(resolved, strategy, len(workers), topic, receiver.queue_name, receiver.shared_dir)
    if isinstance(checkpoint, str):  # in the shared checkpoint directory, which the ranks read themselves
        config["ckpt_path"], checkpoint = checkpoint, None
    shipped_checkpoint = client.scatter(checkpoint, broadcast=True) if checkpoint is not None else None
    stop_event = f"{topic}-stop"
    futures = [
        client.submit(
            run_rank,
            job_reference(job),
            subcommand,
            config,
            rank,
            len(workers),
            main_address,
            main_port,
            shipped_checkpoint,
            stop_event,
            receiver.queue_name,
            receiver.shared_dir is None,
            key=f"{topic}-rank{rank}",
            workers=[worker],
            pure=False,
            allow_other_workers=False,
        )
        for rank, worker in enumerate(workers)
    ]
    try:
        with stop_requests_forwarded(client, stop_event):
            failed = wait_for_ranks(client, futures, workers, on_poll=receiver.receive)
        receiver.receive()
    except BaseException:  # a second Ctrl-C here must not leave ranks training on an existing cluster
        stop_ranks(client, futures, workers, cluster_closes=False)
        raise
    if failed:
        stepped = Event(first_step_event(topic), client=client).is_set()
        raise RankFailure(client, failed, futures, workers, pids, stepped)
    return [future.result() for future in futures]
