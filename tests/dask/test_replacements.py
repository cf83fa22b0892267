"""How long a restart waits for the workers of a failed attempt: for as long as they are coming back, however long
that takes (a loaded machine takes minutes to start a worker process), and not at all when none can come.

The launcher's own embedded LocalCluster, whose nanny restarts a killed worker slowly (tests/dask/slow_start.py), and
the launcher's own choice of workers for a restart (`chosen_workers`), as a restart calls it.
"""

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import dask
import pytest

from tests.dask import slow_start
from tests.dask.workers import kill_worker
from trainrig.dask import DaskOptions
from trainrig.dask.cluster import chosen_workers, connected_client, nannies_of, scheduler_workers

# Longer than the fixed 30 s a restart used to wait, after which it gave up on workers that were still coming.
SLOW_START_S = 35
# What "at once" allows: a few polls of the scheduler and the nannies, on a loaded machine.
GIVES_UP_WITHIN_S = 10


@contextmanager
def two_workers_restarted_slowly(
    tmp_path: Path, options: DaskOptions, slow_start_s: float = SLOW_START_S
) -> Iterator[tuple]:
    """The launcher's embedded cluster of 2 workers, from `options`; from the start of the block, a worker its nanny
    starts again takes `slow_start_s` before it registers. Yields the client, the workers in rank order and their
    nannies, as a restart has them."""
    mark = tmp_path / "slow"
    slowed = {slow_start.MARK_VARIABLE: str(mark), slow_start.SECONDS_VARIABLE: str(slow_start_s)}
    with (
        mock.patch.dict(os.environ, slowed),  # the worker processes inherit this environment
        dask.config.set({"distributed.worker.preload": [slow_start.__file__]}),
        connected_client(options) as (client, _),
    ):
        workers = sorted(scheduler_workers(client))
        nannies = nannies_of(client, workers)
        mark.touch()
        yield client, workers, nannies


@pytest.mark.timeout(180)
def test_a_restart_waits_while_a_nanny_starts_a_slow_worker_again(tmp_path):
    """The killed worker's nanny takes SLOW_START_S to bring it back: the restart gets both workers, after waiting
    longer than the old fixed 30 s."""
    options = DaskOptions(n_workers=2)
    with two_workers_restarted_slowly(tmp_path, options) as (client, workers, nannies):
        kill_worker(client, workers[1])
        started = time.monotonic()
        chosen = chosen_workers(client, options, ranks=2, nannies=nannies)
        waited = time.monotonic() - started
        assert len(chosen) == 2 and workers[0] in chosen and workers[1] not in chosen, chosen
        assert waited > 30, f"got the workers after {waited:.0f} s, before the slow worker could be back"


@pytest.mark.timeout(120)
def test_a_restart_gives_up_at_once_when_the_nanny_is_gone(tmp_path):
    """The worker's nanny closed (as when its process died with its machine): nothing brings the worker back, so the
    restart fails at once with the same line as ever, not after a wait."""
    options = DaskOptions(n_workers=2)
    with two_workers_restarted_slowly(tmp_path, options) as (client, workers, nannies):
        cluster = client.cluster
        (nanny,) = [nanny for nanny in cluster.workers.values() if nanny.worker_address == workers[1]]
        cluster.sync(nanny.close)
        while workers[1] in scheduler_workers(client):
            time.sleep(0.1)
        started = time.monotonic()
        with pytest.raises(SystemExit) as exit_info:
            chosen_workers(client, options, ranks=2, nannies=nannies)
        assert time.monotonic() - started < GIVES_UP_WITHIN_S
    assert exit_info.value.code == (
        "error: the Dask run stopped: 1 healthy worker(s) left for 2 ranks (--dask.min_workers 2)"
    )


@pytest.mark.timeout(120)
def test_a_restart_stops_at_the_replacement_timeout_naming_it(tmp_path):
    """A worker still coming back when --dask.replacement_timeout runs out: the run stops then, naming the option."""
    options = DaskOptions(n_workers=2, replacement_timeout=5)
    with two_workers_restarted_slowly(tmp_path, options, slow_start_s=15) as (client, workers, nannies):
        kill_worker(client, workers[1])
        started = time.monotonic()
        with pytest.raises(SystemExit) as exit_info:
            chosen_workers(client, options, ranks=2, nannies=nannies)
        assert 5 <= time.monotonic() - started < 5 + GIVES_UP_WITHIN_S
    assert exit_info.value.code == (
        "error: the Dask run stopped: 1 worker(s) running and more still coming back after 5 s "
        "(--dask.replacement_timeout)"
    )
