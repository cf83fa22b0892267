"""The client fetches each checkpoint rank 0 leaves on its worker (`run_files.fetched`) for as long as the worker holds
it, with no clock that could drop a large checkpoint on its way from a loaded machine, and gives up at once when the
worker is gone with it. The launcher's own embedded cluster, every core kept busy (trainrig/testing/load.py)."""

import time

import pytest
from distributed import Queue

from tests.dask.workers import kill_worker
from trainrig.dask import DaskOptions
from trainrig.dask.cluster import connected_client
from trainrig.dask.run_files import fetched

pytest_plugins = ["tests.helpers.load"]  # busy_machine

# What "at once" allows: a few polls of the scheduler, on a loaded machine.
GIVES_UP_WITHIN_S = 10


@pytest.mark.timeout(180)
def test_a_checkpoint_is_fetched_while_its_worker_holds_it_and_given_up_once_the_worker_is_gone(busy_machine):
    with connected_client(DaskOptions(n_workers=2)) as (client, _):
        holder = sorted(client.scheduler_info()["workers"])[1]
        queue = Queue("checkpoints", client=client)  # as rank 0 sends them: a future, put in a queue by reference
        for data in (b"kept", b"lost"):
            queue.put(client.scatter(data, workers=[holder]))
        assert fetched(queue.get(timeout=60)) == b"kept"

        kill_worker(client, holder)
        lost = queue.get(timeout=60)
        started = time.monotonic()
        assert fetched(lost) is None
        assert time.monotonic() - started < GIVES_UP_WITHIN_S
