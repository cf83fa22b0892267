"""The Dask cluster a run uses: connecting to one or starting an embedded one, and choosing its workers."""

import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager

import dask
from distributed import Client, LocalCluster
from distributed.comm.addressing import parse_address, parse_host_port
from distributed.core import Status, rpc
from distributed.security import Security

from trainrig.dask import DaskOptions
from trainrig.dask.scheduler_side import starting_nannies
from trainrig.errors import UserInputError, one_line
from trainrig.errors.held_output import release as release_held_output
from trainrig.resume.preemption import STOP_SIGNALS, restore_handlers

log = logging.getLogger("trainrig.dask")

POLL_S = 0.5

# Seconds for cluster housekeeping: connecting, restarting workers, picking the port.
CLUSTER_TIMEOUT_S = 60
# How long the first look at a scheduler's port waits for an answer. A refused connection answers at once; an
# address that does not answer (a firewall dropping packets, a host still booting) is left to the client's timeout.
REFUSAL_PROBE_S = 5
# Address schemes whose location is a TCP host and port.
TCP_SCHEMES = ("tcp", "tls")

# The statuses of a worker that has registered with the scheduler but does not run tasks yet.
REGISTERING = (Status.init.name, Status.starting.name)
# The statuses of a nanny that restarts its worker whenever the worker's process ends.
NANNY_SERVING = (Status.init.name, Status.starting.name, Status.running.name)

EMBEDDED_CLUSTER_CONFIG = {
    # DataLoader workers are child processes, which a daemonic Dask worker may not start.
    "distributed.worker.daemon": False,
    # Dask's background work takes the GIL and a core from training (measured: ~15% of a short
    # run's training time): no task profiler, which samples the training thread's stack every
    # 10 ms, and slower event-loop, system and memory monitors.
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.worker.memory.monitor-interval": "1s",
    # Pinned tasks cannot move, so the scheduler need not look for tasks to steal.
    "distributed.scheduler.work-stealing": False,
    # A LocalCluster closes the nanny of a worker that is not back under its name within this time (15 s by
    # default), although the nanny is still starting it: on a loaded machine that ends a restart that would have
    # succeeded. The launcher decides how long to wait for a worker (`wait_for_replacements`); a nanny that cannot
    # start one closes by itself.
    "distributed.deploy.lost-worker-timeout": "7 days",
}


@contextmanager
def stop_requests_forwarded(client: Client, stop_event: str) -> Iterator[None]:
    """The first SIGINT or SIGTERM to this process asks every rank to checkpoint and stop; the next one interrupts.

    The handler only hands the request to the client's event loop: it runs on the main thread between any two of its
    bytecodes, maybe while that holds a lock the loop needs (a Client call's, between asking and waiting for the
    answer), and a Client call of its own would then wait for the loop forever.
    """
    previous: dict = {}

    async def stop_every_rank(signal_name: str) -> None:
        log.info(f"dask: {signal_name}: every rank checkpoints at its next step, then the run stops")
        await client.scheduler.event_set(name=stop_event)

    def forward(signum: int, frame) -> None:
        restore_handlers(previous)  # a second signal takes the default path: KeyboardInterrupt or termination
        client.loop.add_callback(stop_every_rank, signal.Signals(signum).name)

    if threading.current_thread() is threading.main_thread():
        previous = {signum: signal.signal(signum, forward) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        restore_handlers(previous)


@contextmanager
def connected_client(options: DaskOptions) -> Iterator[tuple[Client, bool]]:
    """A client of the cluster at `options.address`, or of an embedded LocalCluster that is closed on exit."""
    if options.address is not None:
        check_tls_settings(options.address)
        check_not_refused(options.address)
        try:
            client = Client(options.address, timeout=CLUSTER_TIMEOUT_S)
        except OSError as error:
            raise UserInputError(
                f"cannot reach the Dask scheduler at {options.address} ({one_line(error)}); check --dask.address"
            ) from error
        release_held_output()  # the run goes on on the cluster: its progress shows as it comes
        with client:
            yield client, False
        return
    release_held_output()
    threads_per_rank = os.environ.get("OMP_NUM_THREADS") or str(max(1, (os.cpu_count() or 1) // options.n_workers))
    with dask.config.set(EMBEDDED_CLUSTER_CONFIG):
        log.info(f"dask: starting a LocalCluster with {options.n_workers} worker processes")
        with (
            LocalCluster(
                n_workers=options.n_workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                # Over tcp:// any process on this machine, another user's too, could connect and run code in the
                # workers (`client.run`). Credentials made for this cluster alone, held in memory by this process and
                # handed to the scheduler and to each nanny, which gives them to every worker it starts (a
                # replacement too), make it tls:// and refuse a client that has none or others.
                security=Security.temporary(),
                # The client reports a failed task itself, in one line; the workers' own error logs would repeat it.
                silence_logs=logging.CRITICAL,
                env={"OMP_NUM_THREADS": threads_per_rank, "MKL_NUM_THREADS": threads_per_rank},
            ) as cluster,
            Client(cluster) as client,
        ):
            yield client, True


def scheduler_workers(client: Client) -> dict[str, dict]:
    """The scheduler's workers now, address -> its info, from the scheduler's own answer.

    Not `Client.scheduler_info()`: that returns the client's cached copy, which the client's own periodic refresh
    (distributed.client.scheduler-info-interval, 2 s) overwrites with one that lists no workers, also between the
    call's fetch and its return. On a loaded machine a caller then saw no workers at all: a checkpoint on its way home
    was dropped as lost with its worker, and rank 0 waited for it to be stored until its timeout.
    """
    return client.sync(client.scheduler.identity, n_workers=-1)["workers"]


def check_not_refused(address: str) -> None:
    """Fail at once when nothing listens at the scheduler's address."""
    if refused(address):
        raise UserInputError(
            f"nothing listens at --dask.address {address} (connection refused); start the scheduler there or fix "
            "the address"
        )


def refused(address: str) -> bool:
    """Whether a TCP connection to `address` is refused: nothing listens there. Dask's own connections retry a
    refused connection until distributed.comm.timeouts.connect (30 s), although the answer cannot change."""
    scheme, location = parse_address(address)
    if scheme not in TCP_SCHEMES:
        return False
    host, port = parse_host_port(location)
    try:
        socket.create_connection((host, port), timeout=REFUSAL_PROBE_S).close()
    except ConnectionRefusedError:
        return True
    except OSError:
        return False  # no answer yet, or no route: Dask's connection waits its timeout for an answer
    return False


def check_tls_settings(address: str) -> None:
    """A tls:// scheduler takes clients with a certificate its CA signed, given in Dask's configuration."""
    security = Security()
    if address.startswith("tls://") and None in (security.tls_ca_file, security.tls_client_cert):
        raise UserInputError(
            f"--dask.address {address} is a TLS scheduler: give this client the CA's certificate and its own "
            "certificate and key in Dask's config (distributed.comm.tls.ca-file, .client.cert, .client.key, e.g. "
            "DASK_DISTRIBUTED__COMM__TLS__CA_FILE, DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT and "
            "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY)"
        )


def chosen_workers(
    client: Client, options: DaskOptions, ranks: int | None = None, nannies: Collection[str] = ()
) -> list[str]:
    """Worker addresses in a stable order; rank i runs on the i-th.

    A restart (`ranks` known) waits for as many workers as the job started with for as long as more can come (see
    `wait_for_replacements`; `nannies`: those of the failed attempt's workers), then goes on with fewer
    (--dask.min_workers) or fails.
    """
    if ranks is not None:
        return replacement_workers(client, options, ranks, nannies)
    if options.workers is not None:
        return named_workers(client, options.workers)
    if options.n_workers is not None:
        try:
            client.wait_for_workers(options.n_workers, timeout=CLUSTER_TIMEOUT_S)
        except TimeoutError as error:
            found = len(scheduler_workers(client))
            raise UserInputError(
                f"the Dask cluster has {found} worker(s) but --dask.n_workers asks for {options.n_workers}"
            ) from error
    workers = sorted(scheduler_workers(client))
    if not workers:
        raise UserInputError(f"the Dask cluster at {options.address} has no workers")
    return workers[: options.n_workers]


def replacement_workers(client: Client, options: DaskOptions, ranks: int, nannies: Collection[str]) -> list[str]:
    """The workers a restart runs its ranks on, once the failed attempt's workers are back or no more can come."""
    if options.workers is not None:
        running = wait_for_replacements(
            client, options, nannies, enough=lambda running: not missing_names(running, options.workers)
        )
        if missing := missing_names(running, options.workers):
            raise SystemExit(
                f"error: the Dask run stopped: the Dask cluster at {client.scheduler.address} has no worker named "
                f"{', '.join(missing)}"
            )
        return [workers_by_name(running)[name] for name in options.workers]
    running = wait_for_replacements(client, options, nannies, enough=lambda running: len(running) >= ranks)
    needed = options.min_workers or ranks
    if len(running) < needed:
        raise SystemExit(
            f"error: the Dask run stopped: {len(running)} healthy worker(s) left for {ranks} ranks "
            f"(--dask.min_workers {needed})"
        )
    if len(running) < ranks:
        log.info(
            f"dask: continuing with {len(running)} of {ranks} ranks (--dask.min_workers {options.min_workers}): "
            "each keeps its batch size and the learning rate, so the global batch is smaller"
        )
    return sorted(running)[:ranks]


def wait_for_replacements(
    client: Client, options: DaskOptions, nannies: Collection[str], enough: Callable[[dict[str, dict]], bool]
) -> dict[str, dict]:
    """The scheduler's running workers (address -> its info) once they are `enough`, or once no more can come.

    How long a worker takes to come back is the machine's affair (a loaded machine takes minutes to start a worker
    process that imports torch), so no clock decides whether one is coming: the scheduler and the nannies do (see
    `replacements_coming`). Only --dask.replacement_timeout bounds a wait that keeps seeing workers on their way.
    """
    deadline = time.monotonic() + options.replacement_timeout
    while True:
        workers = scheduler_workers(client)
        running = {address: worker for address, worker in workers.items() if worker["status"] == Status.running.name}
        if enough(running) or not replacements_coming(client, workers, nannies):
            return running
        if time.monotonic() >= deadline:
            raise SystemExit(
                f"error: the Dask run stopped: {len(running)} worker(s) running and more still coming back after "
                f"{options.replacement_timeout:g} s (--dask.replacement_timeout)"
            )
        time.sleep(POLL_S)


def replacements_coming(client: Client, workers: dict[str, dict], nannies: Collection[str]) -> bool:
    """Whether a worker is on its way: one that registered with the scheduler and does not run yet; one of `nannies`
    whose worker is not registered, still serving (a nanny starts a new worker process whenever its worker's process
    ends, until the nanny itself closes, and it closes when it cannot start one); a new nanny starting its first
    worker. A nanny that does not answer (its process died with its machine) brings no worker back."""
    if any(worker["status"] in REGISTERING for worker in workers.values()):
        return True
    serving = {worker.get("nanny") for worker in workers.values()}
    connection_args = client.security.get_connection_args("client")
    restarting = [nanny for nanny in nannies if nanny not in serving]
    if any(client.sync(nanny_serves, nanny, connection_args) for nanny in restarting):
        return True
    return client.run_on_scheduler(starting_nannies) > 0


async def nanny_serves(address: str, connection_args: dict) -> bool:
    """Whether the nanny at `address` answers and is not closing: then it is starting its worker again."""
    if refused(address):  # the nanny's process is gone: no need to wait for Dask's connection to give up
        return False
    try:
        async with rpc(address, connection_args=connection_args) as nanny:
            state = await nanny.dump_state()
    except OSError:  # refused, or no answer within distributed.comm.timeouts.connect: the nanny is gone
        return False
    return state["status"] in NANNY_SERVING


def nannies_of(client: Client, workers: list[str]) -> list[str]:
    """The nannies of `workers`, read while the workers run: the scheduler forgets a worker's nanny with the worker."""
    info = scheduler_workers(client)
    return [info[worker]["nanny"] for worker in workers if info.get(worker, {}).get("nanny")]


def workers_by_name(workers: dict[str, dict]) -> dict[str, str]:
    """Name (as `dask worker --name` gave it) or address -> address, for the workers `workers` lists."""
    by_name = {str(worker.get("name")): address for address, worker in workers.items()}
    return {**by_name, **{address: address for address in workers}}


def missing_names(workers: dict[str, dict], names: list[str]) -> list[str]:
    found = workers_by_name(workers)
    return [name for name in names if name not in found]


def named_workers(client: Client, names: list[str]) -> list[str]:
    """The addresses of the workers `--dask.workers` names, once all of them are connected."""
    deadline = time.monotonic() + CLUSTER_TIMEOUT_S
    while True:
        workers = scheduler_workers(client)
        if not (missing := missing_names(workers, names)):
            return [workers_by_name(workers)[name] for name in names]
        if time.monotonic() > deadline:
            known = ", ".join(sorted(str(worker.get("name")) for worker in workers.values())) or "none"
            raise UserInputError(
                f"the Dask cluster at {client.scheduler.address} has no worker named {', '.join(missing)} "
                f"(--dask.workers); its workers: {known}"
            )
        time.sleep(POLL_S)
