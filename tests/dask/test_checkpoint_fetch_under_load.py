"""The client reads each checkpoint rank 0 holds open on its worker in pieces (`run_files.pieces`), for as long as the
worker holds it, with no clock that could drop a large checkpoint on its way from a loaded machine, and gives up at
once when the worker is gone with it. The launcher's own embedded cluster, every core kept busy
(trainrig/testing/load.py)."""

import os
import time

import pytest

from tests.dask.workers import kill_worker
from trainrig.dask import DaskOptions
from trainrig.dask.cluster import connected_client
from trainrig.dask.results_to_client import PIECE_BYTES, held_for_client
from trainrig.dask.run_files import pieces, store_checkpoint

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
        holder = sorted(client.scheduler_info()["workers"])[1]
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
