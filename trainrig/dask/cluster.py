"""The Dask cluster a run uses: connecting to one or starting an embedded one, and choosing its workers."""

import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import dask
from distributed import Client, Event, LocalCluster
from distributed.comm.addressing import parse_address, parse_host_port
from distributed.security import Security

from trainrig.dask import DaskOptions
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

# How long a restart waits for the workers of the failed attempt to be back (a nanny restarts a dead worker within
# seconds) before it goes on with fewer (--dask.min_workers) or fails.
REPLACEMENT_WAIT_S = 30

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
}


@contextmanager
def stop_requests_forwarded(client: Client, stop_event: str) -> Iterator[None]:
    """The first SIGINT or SIGTERM to this process asks every rank to checkpoint and stop; the next one interrupts."""
    previous: dict = {}

    def forward(signum: int, frame) -> None:
        restore_handlers(previous)  # a second signal takes the default path: KeyboardInterrupt or termination
        log.info(f"dask: {signal.Signals(signum).name}: every rank checkpoints at its next step, then the run stops")
        Event(stop_event, client=client).set()

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
                # The client reports a failed task itself, in one line; the workers' own error logs would repeat it.
                silence_logs=logging.CRITICAL,
                env={"OMP_NUM_THREADS": threads_per_rank, "MKL_NUM_THREADS": threads_per_rank},
            ) as cluster,
            Client(cluster) as client,
        ):
            yield client, True


def check_not_refused(address: str) -> None:
    """Fail at once when nothing listens at the scheduler's address: Dask's client retries a refused connection
    until its timeout, although the answer cannot change."""
    scheme, location = parse_address(address)
    if scheme not in TCP_SCHEMES:
        return
    host, port = parse_host_port(location)
    try:
        socket.create_connection((host, port), timeout=REFUSAL_PROBE_S).close()
    except ConnectionRefusedError as error:
        raise UserInputError(
            f"nothing listens at --dask.address {address} (connection refused); start the scheduler there or fix "
            "the address"
        ) from error
    except OSError:
        return  # no answer yet, or no route: the client waits its timeout for the scheduler to appear


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


def chosen_workers(client: Client, options: DaskOptions, ranks: int | None = None) -> list[str]:
    """Worker addresses in a stable order; rank i runs on the i-th. A restart (`ranks` known) waits for as many."""
    if options.workers is not None:
        return named_workers(client, options.workers, restart=ranks is not None)
    wanted = ranks or options.n_workers
    if wanted is not None:
        try:
            client.wait_for_workers(wanted, timeout=REPLACEMENT_WAIT_S if ranks else CLUSTER_TIMEOUT_S)
        except TimeoutError as error:
            found = len(client.scheduler_info()["workers"])
            if ranks is None:
                raise UserInputError(
                    f"the Dask cluster has {found} worker(s) but --dask.n_workers asks for {options.n_workers}"
                ) from error
            if found < (options.min_workers or ranks):
                raise SystemExit(
                    f"error: the Dask run stopped: {found} healthy worker(s) left for {ranks} ranks "
                    f"(--dask.min_workers {options.min_workers or ranks})"
                ) from error
            log.info(
                f"dask: continuing with {found} of {ranks} ranks (--dask.min_workers {options.min_workers}): each "
                "keeps its batch size and the learning rate, so the global batch is smaller"
            )
            wanted = found
    workers = sorted(client.scheduler_info()["workers"])
    if not workers:
        raise UserInputError(f"the Dask cluster at {options.address} has no workers")
    return workers[:wanted]


def named_workers(client: Client, names: list[str], restart: bool) -> list[str]:
    """The addresses of the workers `--dask.workers` names, once all of them are connected."""
    deadline = time.monotonic() + (REPLACEMENT_WAIT_S if restart else CLUSTER_TIMEOUT_S)
    while True:
        workers = client.scheduler_info(n_workers=-1)["workers"]
        by_name = {str(worker.get("name")): address for address, worker in workers.items()}
        found = {**by_name, **{address: address for address in workers}}
        missing = [name for name in names if name not in found]
        if not missing:
            return [found[name] for name in names]
        if time.monotonic() > deadline:
            message = f"the Dask cluster at {client.scheduler.address} has no worker named {', '.join(missing)}"
            if restart:
                raise SystemExit(f"error: the Dask run stopped: {message}")
            raise UserInputError(f"{message} (--dask.workers); its workers: {', '.join(sorted(by_name)) or 'none'}")
        time.sleep(POLL_S)
