"""The client reads each checkpoint rank 0 holds open on its worker in pieces (`run_files.pieces`), for as long as the
worker holds it, with no clock that could drop a large checkpoint on its way from a loaded machine, and gives up at
once when the worker is gone with it. The launcher's own embedded cluster, every core kept busy
(trainrig/testing/load.py)."""

import os
import time

import dask
import pytest

from tests.dask.workers import kill_worker
from trainrig.dask import DaskOptions, run_files
from trainrig.dask.cluster import connected_client, scheduler_workers
from trainrig.dask.results_to_client import PIECE_BYTES, held_for_client
from trainrig.dask.run_files import LostWithItsWorker, pieces, store_checkpoint

pytest_plugins = ["tests.helpers.load"]  # busy_machine

# What "at once" allows: a few polls of the scheduler, on a loaded machine.
GIVES_UP_WITHIN_S = 10


@pytest.mark.timeout(180)
def test_a_checkpoint_is_read_while_its_worker_holds_it_and_given_up_once_the_worker_is_gone(busy_machine, tmp_path):
    worker_side, client_side = tmp_path / "worker", tmp_path / "client"
    worker_side.mkdir()
    content = os.urandom(3 * PIECE_BYTES + 5)  # several pieces, the last one short
    for name, data in (("kept.ckpt", content), ("lost.ckpt", b"lost")):
        (worker_side / name).write_bytes(data)
    with connected_client(DaskOptions(n_workers=2)) as (client, _):
        holder = sorted(scheduler_workers(client))[1]
        kept, lost = (
            client.run(held_for_client, worker_side / name, name, "stored", holder, workers=[holder])[holder]
            for name in ("kept.ckpt", "lost.ckpt")
        )
        # Training goes on and writes the next checkpoint over the path: the client still gets the one it was sent.
        (worker_side / "next.ckpt").write_bytes(b"the next checkpoint")
        os.replace(worker_side / "next.ckpt", worker_side / "kept.ckpt")
        assert store_checkpoint(client_side / "kept.ckpt", pieces(client, kept))
        assert (client_side / "kept.ckpt").read_bytes() == content

        kill_worker(client, holder)
        started = time.monotonic()
        assert not store_checkpoint(client_side / "lost.ckpt", pieces(client, lost))
        assert time.monotonic() - started < GIVES_UP_WITHIN_S
        assert sorted(path.name for path in client_side.iterdir()) == ["kept.ckpt"]


# The client's refresh of its cached view of the cluster: every millisecond here, instead of every 2 s.
REFRESH = "1ms"
# Looks at the cluster while it refreshes: taking the cache for the answer missed the worker in ~5% of them.
LOOKS = 2000
# A piece of a kilobyte, so that each piece of a checkpoint looks at the cluster again.
SMALL_PIECE_BYTES = 1024


@pytest.mark.timeout(120)
def test_the_client_sees_its_workers_and_brings_a_checkpoint_home_while_it_refreshes_its_view_of_the_cluster(
    tmp_path, monkeypatch
):
    """The client's periodic refresh of its cached view of the cluster (distributed.client.scheduler-info-interval)
    lists no workers. A look at the cluster while it lands must still see every worker: under load, a piece asked for
    then took the checkpoint's worker for gone and dropped the checkpoint on its way home, and rank 0 waited for it to
    be stored until its timeout (a stopped run hung past its test's 240 s)."""
    monkeypatch.setattr(run_files, "PIECE_BYTES", SMALL_PIECE_BYTES)
    content = os.urandom(100 * SMALL_PIECE_BYTES + 5)
    (tmp_path / "sent.ckpt").write_bytes(content)
    with (
        dask.config.set({"distributed.client.scheduler-info-interval": REFRESH}),
        connected_client(DaskOptions(n_workers=1)) as (client, _),
    ):
        (holder,) = scheduler_workers(client)
        missed = sum(holder not in scheduler_workers(client) for _ in range(LOOKS))
        assert missed == 0, f"{missed} of {LOOKS} looks at the cluster missed its one worker"
        sent = client.run(held_for_client, tmp_path / "sent.ckpt", "sent.ckpt", "stored", holder, workers=[holder])
        assert store_checkpoint(tmp_path / "home" / "sent.ckpt", pieces(client, sent[holder])), "taken for lost"
    assert (tmp_path / "home" / "sent.ckpt").read_bytes() == content


def test_a_checkpoint_lost_on_its_way_leaves_last_and_previous_as_they_were(tmp_path):
    """The store of a new last.ckpt whose worker is lost midway renames nothing: previous.ckpt stays the checkpoint
    before last.ckpt (it once became a second name of last.ckpt as the store began, and the older one was gone)."""
    (tmp_path / "last.ckpt").write_bytes(b"newest complete")
    (tmp_path / "previous.ckpt").write_bytes(b"the one before")

    def lost_midway():
        yield b"half of a newer one"
        raise LostWithItsWorker(tmp_path / "last.ckpt")

    assert not store_checkpoint(tmp_path / "last.ckpt", lost_midway())
    assert (tmp_path / "last.ckpt").read_bytes() == b"newest complete"
    assert (tmp_path / "previous.ckpt").read_bytes() == b"the one before"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["last.ckpt", "previous.ckpt"]
    assert store_checkpoint(tmp_path / "last.ckpt", iter([b"newer"]))
    assert (tmp_path / "previous.ckpt").read_bytes() == b"newest complete"
    assert (tmp_path / "last.ckpt").read_bytes() == b"newer"
