"""How the client watches the ranks of an attempt: their epoch metrics as they arrive, waiting for them to finish or
fail, and stopping them."""

import logging
import time

from distributed import Client

from trainrig.dask.cluster import CLUSTER_TIMEOUT_S, POLL_S, scheduler_workers
from trainrig.dask.failures import SETTLE_S

log = logging.getLogger("trainrig.dask")


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
    failed rank until the timeout. Only a nanny restarts its worker: a rank still running on a worker started without
    one (`dask worker --no-nanny`) ends when its collectives fail for want of the lost rank, and the next attempt's
    rank there waits for its thread.
    """
    alive = scheduler_workers(client)
    running = [worker for future, worker in zip(futures, workers) if future.status == "pending" and worker in alive]
    still_running = [worker for worker in running if alive[worker].get("nanny")]
    if without_nanny := sorted(set(running) - set(still_running)):
        log.info(f"dask: workers {without_nanny} have no nanny to restart them; their ranks end with their collectives")
    client.cancel(futures, force=True)
    if still_running and not cluster_closes:
        log.info(f"dask: restarting workers {still_running}, whose ranks were still running")
        # The timeout bounds the nannies' kill (a nanny that does not answer in time loses its worker by force) and
        # the wait for the workers to be back, which then returns without raising: the restart's own wait for its
        # workers (cluster.wait_for_replacements) goes on for as long as they are coming.
        client.restart_workers(still_running, timeout=CLUSTER_TIMEOUT_S, raise_for_error=False)
