"""`--dask.n_workers N` / `--dask.address tcp://HOST:8786`: the same cli.py run as DDP over the workers of a Dask
cluster.

The client (this process) only parses the config, into the run's description (description.py), which also checks
it. It pins one `worker.run_rank` task to each worker, with the description, and each task runs cli.py as one DDP
rank. While they train, rank 0's epoch metrics arrive here as Dask events; at the end rank 0's run directory
(metrics, checkpoints) comes back as bytes and is written to this machine's log directory. A task that raises or a
worker that dies stops the attempt: the client names the rank, the worker and the cause, cancels the rest and starts
them again from the newest checkpoint, or exits non-zero.
"""

import logging
import os
import sys
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import replace

import yaml
from distributed import Client, Event
from distributed.comm import get_address_host
from distributed.utils import open_port

from trainrig.dask.cluster import (
    CLUSTER_TIMEOUT_S,
    chosen_workers,
    connected_client,
    nannies_of,
    stop_requests_forwarded,
)
from trainrig.dask.description import Attempt, RunDescription, describe_run
from trainrig.dask.failures import RankFailure, recorded_worker_deaths
from trainrig.dask.ranks import show_metrics, stop_ranks, wait_for_ranks
from trainrig.dask.run_files import CheckpointReceiver, starting_checkpoint, write_run_dir
from trainrig.dask.worker import run_rank
from trainrig.resume.preemption import Preempted

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
        resolved: the subcommand's whole parsed config as plain data, as `--print_config` shows it; left as it is.
    """
    description = describe_run(job, subcommand, resolved)
    options = description.options
    checkpoint = starting_checkpoint(description)

    with ExitStack() as stack:
        client, embedded = stack.enter_context(connected_client(options))
        death_reasons = stack.enter_context(recorded_worker_deaths())
        if options.restart:
            log.info("dask: restarting the cluster's workers")
            client.restart(timeout=CLUSTER_TIMEOUT_S)
        max_restarts = options.max_restarts
        if max_restarts is None:
            max_restarts = EMBEDDED_MAX_RESTARTS if embedded else EXISTING_MAX_RESTARTS
        ranks, nannies, previous_cause = None, [], None
        for restart in range(max_restarts + 1):
            workers = chosen_workers(client, options, ranks, nannies)
            ranks, nannies = ranks or len(workers), nannies_of(client, workers)
            receiver = CheckpointReceiver(client, description.output_root, description.shared_dir)
            try:
                results = run_attempt(client, description, restart, workers, checkpoint, receiver, embedded)
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
            # The config that reproduces this run is the client's as given: with its dask section, its run not named.
            config_text = yaml.safe_dump(resolved, sort_keys=False)
            destination = write_run_dir(results[0], description.output_root, config_text, receiver.metrics_bases)
            log.info(f"dask: rank 0's results are in {destination}")
            if any(result["preempted"] for result in results):
                log.info(
                    f"dask: stopped with a checkpoint in {description.shared_dir or destination / 'checkpoints'}; "
                    "the same command with --ckpt_path last continues the run"
                )
                raise Preempted
            return


def run_attempt(
    client: Client,
    description: RunDescription,
    number: int,
    workers: list[str],
    checkpoint: bytes | str | None,
    receiver: CheckpointReceiver,
    embedded: bool,
) -> list[dict]:
    """Run every rank once, from `checkpoint` (bytes sent to every worker, or a path in the shared directory): their
    results, or a RankFailure with the ranks still pinned to their workers.

    `embedded`: the cluster is this process's own and closes with it, so an interrupted attempt (a second Ctrl-C)
    leaves its ranks to the closing cluster instead of first restarting the workers they run on."""
    pids = client.run(os.getpid, workers=workers)
    main_port = client.submit(open_port, workers=[workers[0]], pure=False, allow_other_workers=False).result(
        timeout=CLUSTER_TIMEOUT_S
    )
    for rank, worker in enumerate(workers):
        log.info(f"dask: rank {rank} on worker {worker} (pid {pids[worker]})")

    attempt = Attempt(
        number=number,
        world_size=len(workers),
        main_address=get_address_host(workers[0]),
        main_port=main_port,
        topic=f"lightning-dask-{uuid.uuid4().hex}",
        checkpoint_queue=receiver.queue_name,
        ckpt_path=checkpoint if isinstance(checkpoint, str) else None,  # the ranks read it in the shared directory
    )
    client.subscribe_topic(attempt.topic, show_metrics)
    shipped_checkpoint = client.scatter(checkpoint, broadcast=True) if isinstance(checkpoint, bytes) else None
    described = replace(description, attempt=attempt)
    futures = [
        client.submit(
            run_rank,
            described,
            rank,
            shipped_checkpoint,
            key=f"{attempt.topic}-rank{rank}",
            workers=[worker],
            pure=False,
            allow_other_workers=False,
        )
        for rank, worker in enumerate(workers)
    ]
    try:
        with stop_requests_forwarded(client, attempt.stop_event):
            failed = wait_for_ranks(client, futures, workers, on_poll=receiver.receive)
        receiver.receive()
    except BaseException:  # a second Ctrl-C: at once on an embedded cluster, no ranks left training on an existing one
        stop_ranks(client, futures, workers, cluster_closes=embedded)
        raise
    if failed:
        stepped = Event(attempt.first_step_event, client=client).is_set()
        raise RankFailure(client, failed, futures, workers, pids, stepped)
    return [future.result() for future in futures]
