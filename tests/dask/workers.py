"""What the Dask tests do to a cluster's workers from outside, as a crash or the OOM killer would."""

import os
import signal
import time

from trainrig.dask.cluster import scheduler_workers


def kill_worker(client, worker: str) -> None:
    """kill -9 the worker's process, and wait until the scheduler has dropped it, as when a restart begins."""
    os.kill(client.run(os.getpid, workers=[worker])[worker], signal.SIGKILL)
    while worker in scheduler_workers(client):
        time.sleep(0.1)
