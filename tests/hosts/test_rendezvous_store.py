"""Where rank 0's rendezvous store listens (trainrig/network.py): on loopback only for a job on one machine, on the
address the ranks meet at for a job across machines (emulated hosts, trainrig/testing/hosts.py), and on every
address only where no one address serves every rank."""

import json
import os
import subprocess
import sys

import pytest

from tests.helpers.run_if import run_if
from tests.helpers.runs import EXAMPLE_CONFIGS, ROOT, small_run_args
from trainrig.testing.hosts import EmulatedHosts

RUN_TIMEOUT_S = 240
STORE_PORT = 29470

# Rank `argv[1]` of a two-process gloo group for each case in turn (MASTER_ADDR, then MASTER_PORT), formed through
# the `env://` rendezvous as Lightning forms it, inside the run's `rendezvous_network()`. Rank 0 prints, per case,
# where its process listens on the store's port; both ranks prove the group works with an all-reduce.
RANK = """
import json, os, sys
from datetime import timedelta
import torch
import torch.distributed as dist
from tests.hosts.listeners import store_listeners
from trainrig.network import rendezvous_network

rank, cases = int(sys.argv[1]), json.loads(sys.argv[2])
for master, port in cases:
    os.environ.update(MASTER_ADDR=master, MASTER_PORT=str(port), WORLD_SIZE="2")
    with rendezvous_network():
        dist.init_process_group("gloo", rank=rank, world_size=2, timeout=timedelta(seconds=60))
        listeners = store_listeners(port)
        total = torch.ones(1)
        dist.all_reduce(total)
        dist.destroy_process_group()
    print(json.dumps({"master": master, "listeners": listeners, "sum": total.item()}), flush=True)
"""


@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
def test_a_run_on_one_machine_keeps_its_store_on_loopback(tmp_path, shapes_root):
    """`--trainer.devices 2` through the real CLI, whose strategy forms its group as every strategy here does: torch
    alone would listen on every address, where a neighbour reaches the store at this machine's outward address."""
    report = tmp_path / "store.json"
    args = small_run_args(EXAMPLE_CONFIGS[-1], tmp_path, shapes_root, "--trainer.limit_val_batches", "0")
    args += ["--trainer.strategy", "ddp", "--trainer.devices", "2", "--trainer.accelerator", "cpu"]
    args += ["--trainer.callbacks+=tests.hosts.listeners.StoreListeners"]
    args += ["--trainer.callbacks.init_args.report", str(report)]
    command = [sys.executable, "cli.py", "fit", *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert result.returncode == 0, result.stderr[-3000:]

    found = json.loads(report.read_text())
    assert found["listeners"] == [f"127.0.0.1:{found['port']}"], found
    assert not any(found["outward"].values()), f"the store answered a neighbour: {found}"


@run_if(emulated_hosts=True)
@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
def test_across_machines_the_store_listens_where_the_ranks_meet():
    """By the first host's address, the store listens there alone. By its name, which resolves to loopback on the
    first host (as on stock Debian/Ubuntu) and to its address on the others, rank 0 reaches its store by loopback and
    the other host by the address: only every address serves both."""
    with EmulatedHosts(2) as hosts:
        first = hosts[0]
        cases = [(first.address, STORE_PORT), (first.name, STORE_PORT + 1)]
        ranks = [
            host.popen(
                [sys.executable, "-c", RANK, str(rank), json.dumps(cases)],
                env=host.environment(PYTHONPATH=str(ROOT)),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for rank, host in enumerate(hosts)
        ]
        outputs = [rank.communicate(timeout=RUN_TIMEOUT_S) for rank in ranks]
    assert [rank.returncode for rank in ranks] == [0, 0], [stderr[-2000:] for _, stderr in outputs]
    by_address, by_name = [json.loads(line) for line in outputs[0][0].splitlines()]
    assert by_address == {"master": first.address, "listeners": [f"{first.address}:{STORE_PORT}"], "sum": 2.0}
    assert by_name["listeners"] in ([f"0.0.0.0:{STORE_PORT + 1}"], [f":::{STORE_PORT + 1}"]), by_name
    assert by_name["sum"] == 2.0
