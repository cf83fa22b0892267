"""One job across machines, on emulated hosts (trainrig/testing/hosts.py), started with the commands the docs give for
several machines.

Every host runs the project from its installed wheel (tests/helpers/installed.py) in its own working directory,
outside the checkout, with its own copy of the config and its own generated data. Each host's name resolves to a
loopback address, as on stock Debian/Ubuntu: the runs pass only because each rank picks the interface that reaches
the rendezvous address (trainrig/network.py). A run across hosts has the losses of the same job on one host.
"""

import json
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

from tests.helpers.installed import installed_python
from tests.helpers.mlp.multi_host_runs import (
    DDP_TIMEOUT,
    RENDEZVOUS_PORT,
    RUN_TIMEOUT_S,
    TimedLines,
    finished,
    job_args,
    losses,
    one_host_losses,
    torchrun,
)
from tests.helpers.ran import assert_ran_as
from tests.helpers.run_dirs import assert_same_weights, final_weights
from tests.helpers.run_if import run_if
from tests.helpers.runs import ROOT
from trainrig.testing.hosts import EmulatedHosts, Host


@run_if(emulated_hosts=True)
def test_each_rank_picks_the_interface_that_reaches_the_rendezvous():
    """Here MASTER_ADDR names a host as a launcher would set it."""
    cases = {
        "another host by name": {"MASTER_ADDR": "h1", "WORLD_SIZE": "2"},
        "this host by its address": {"MASTER_ADDR": "198.18.0.2", "WORLD_SIZE": "2"},
        "this host by its name, which resolves to loopback": {"MASTER_ADDR": "h2", "WORLD_SIZE": "2"},
        "this host by name, every rank on it": {"MASTER_ADDR": "h2", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2"},
        "loopback": {"MASTER_ADDR": "127.0.0.1", "WORLD_SIZE": "2"},
        "localhost, as a cluster operator sets on the master pod": {"MASTER_ADDR": "localhost", "WORLD_SIZE": "2"},
        "localhost, every rank here": {"MASTER_ADDR": "localhost", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2"},
        "an unknown host": {"MASTER_ADDR": "no-such-host.invalid", "WORLD_SIZE": "2"},
    }
    script = (
        "import json, sys\n"
        "from trainrig.network import chosen_interface\n"
        "print(json.dumps({name: chosen_interface(env) for name, env in json.loads(sys.argv[1]).items()}))\n"
    )
    with EmulatedHosts(2) as hosts:
        result = hosts[1].run([installed_python(), "-c", script, json.dumps(cases)])
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "another host by name": "eth0",
        "this host by its address": "eth0",
        "this host by its name, which resolves to loopback": "eth0",
        "this host by name, every rank on it": None,
        "loopback": None,
        "localhost, as a cluster operator sets on the master pod": "eth0",
        "localhost, every rank here": None,
        "an unknown host": None,
    }


@run_if(emulated_hosts=True)
def test_torchrun_on_two_hosts_matches_one_host():
    python = installed_python()
    with EmulatedHosts(2) as hosts:
        first = hosts[0]
        processes = []
        for host in hosts:
            # The first host's name resolves to loopback there, so torch cannot tell that the endpoint is its own.
            hosts_the_store = ["--rdzv_conf", "is_host=1"] if host is first else []
            command = torchrun(
                python,
                *("--nnodes", "2", "--nproc_per_node", "1", "--rdzv_backend", "c10d", "--rdzv_id", "mlp"),
                *("--rdzv_endpoint", f"{first.address}:{RENDEZVOUS_PORT}", *hosts_the_store),
            )
            ranks = ["--trainer.strategy", "ddp"]
            ranks += ["--trainer.strategy.init_args.timeout", DDP_TIMEOUT, "--trainer.accelerator", "cpu"]
            ranks += ["--trainer.devices", "1", "--trainer.num_nodes", "2"]
            output = dict(stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            processes.append(host.popen(command + job_args(host) + ranks, **output))
        outputs = finished(processes)
        assert [process.returncode for process in processes] == [0, 0], outputs
        ran_as = dict(strategy="DDPStrategy", processes=2, nodes=2, environment="TorchElasticEnvironment")
        assert_ran_as(first.workdir / "logs", **ran_as)
        assert losses(first.workdir / "logs") == one_host_losses()
        assert not (hosts[1].workdir / "logs").exists()  # only global rank 0 writes


def elastic_torchrun(host: Host, first: Host, claim: Path) -> subprocess.Popen:
    """One machine's agent of an elastic two-machine DDP job, as docs/machines.md gives it, its logs/ on shared
    storage (`claim`), continuing the experiment's newest checkpoint; output in `host`'s torchrun.log."""
    (host.workdir / "logs").unlink(missing_ok=True)
    (host.workdir / "logs").symlink_to(claim)
    hosts_the_store = ["--rdzv_conf", "is_host=1"] if host is first else []
    command = torchrun(
        installed_python(),
        *("--nnodes", "2:2", "--nproc_per_node", "1", "--max_restarts", "2", "--rdzv_backend", "c10d"),
        *("--rdzv_id", "mlp", "--rdzv_endpoint", f"{first.address}:{RENDEZVOUS_PORT}", *hosts_the_store),
    )
    ranks = ["--trainer.strategy", "ddp", "--trainer.strategy.init_args.timeout"]
    ranks += [DDP_TIMEOUT, "--trainer.accelerator", "cpu", "--trainer.devices", "1", "--trainer.num_nodes", "2"]
    ranks += ["--trainer.max_epochs", "3", "--trainer.limit_train_batches", "10", "--trainer.deterministic", "true"]
    log = (host.workdir / "torchrun.log").open("a")
    env = host.environment(TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1")
    return host.popen(command + job_args(host) + ranks + ["--ckpt_path", "last"], env=env, stdout=log, stderr=log)


@run_if(emulated_hosts=True)
def test_elastic_torchrun_loses_a_host_and_ends_with_the_uninterrupted_weights():
    """Once the job holds a checkpoint, every process of the second machine (agent and worker) is killed and its
    agent started again, as a replaced machine would; the first machine's agent restarts its worker, both resume from
    the shared checkpoint and the job ends with the uninterrupted job's weights."""
    weights = {}
    with EmulatedHosts(2) as hosts:
        first, lost = hosts
        for run in ("uninterrupted", "lost host"):
            claim = hosts.root / f"claim-{run.replace(' ', '-')}"
            claim.mkdir()
            agents = [elastic_torchrun(host, first, claim) for host in hosts]
            if run == "lost host":
                deadline = time.monotonic() + RUN_TIMEOUT_S
                while not any(claim.rglob("last.ckpt")) and agents[1].poll() is None and time.monotonic() < deadline:
                    time.sleep(0.1)
                lost.lose()
                agents[1] = elastic_torchrun(lost, first, claim)
            finished(agents)
            outputs = [(host.workdir / "torchrun.log").read_text()[-3000:] for host in hosts]
            assert [agent.returncode for agent in agents] == [0, 0], outputs
            if run == "lost host":
                assert "exiting 134, a restart resumes" in outputs[0], outputs[0]
                assert "resume: continuing from" in outputs[0], outputs[0]  # global rank 0, on the first machine
            ran_as = dict(strategy="DDPStrategy", processes=2, nodes=2, environment="TorchElasticEnvironment")
            assert_ran_as(claim, **ran_as)
            weights[run] = final_weights(claim)
    assert_same_weights(weights["lost host"], weights["uninterrupted"])


def test_torchrun_restarts_across_machines_sharing_the_agents_store_stop_with_the_fix(tmp_path):
    """torch keeps the agents' store across restarts and each machine's agent counts restarts on its own, so a
    restarted worker could not find its peers: such a job stops at once with the setting that gives each round a
    store of its own."""
    elastic = {"TORCHELASTIC_USE_AGENT_STORE": "True", "GROUP_WORLD_SIZE": "2", "TORCHELASTIC_MAX_RESTARTS": "2"}
    result = subprocess.run(
        [sys.executable, ROOT / "cli.py", "fit", "--config", ROOT / "configs" / "mlp.yaml"],
        cwd=tmp_path,
        env={**os.environ, **elastic},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: torchrun restarts across machines need a store per attempt: set TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 "
        "in torchrun's environment on every machine"
    ]


@run_if(emulated_hosts=True)
def test_ranks_that_cannot_connect_say_where_they_listened_within_the_timeout():
    """GLOO_SOCKET_IFNAME is the user's to set: set to loopback, as gloo would choose itself, the ranks fail."""
    python = installed_python()
    timeout_s = 5
    with EmulatedHosts(2) as hosts:
        first = hosts[0]
        processes = []
        for host in hosts:
            command = [python, "-m", "cli", "fit", *job_args(host), "--trainer.accelerator", "cpu"]
            command += ["--trainer.strategy", "ddp"]
            command += [
                "--trainer.strategy.init_args.timeout",
                str(timedelta(seconds=timeout_s)),
                "--trainer.num_nodes",
                "2",
            ]
            # Lightning's own variables for a job on several machines.
            node = {"MASTER_ADDR": first.address, "MASTER_PORT": str(RENDEZVOUS_PORT), "NODE_RANK": str(len(processes))}
            env = host.environment(**node, GLOO_SOCKET_IFNAME="lo")
            processes.append(host.popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
        timed = [TimedLines(process.stderr) for process in processes]
        for process in processes:
            process.wait(timeout=RUN_TIMEOUT_S)
        exited = time.monotonic()
    for process, lines in zip(processes, timed):
        lines.join(timeout=10)
        stderr = "".join(line for _, line in lines.lines)
        assert process.returncode == 134, stderr
        # From the rank's first failed attempt to connect (gloo logs each), not from its interpreter's cold start.
        first_attempt = min(at for at, line in lines.lines if "failed to connect" in line or line.startswith("error:"))
        assert exited - first_attempt < 60, f"{exited - first_attempt:.0f} s after the first attempt\n{stderr}"
        (line,) = [line for line in stderr.splitlines() if line.startswith("error:")]
        assert line.startswith("error: the ranks could not connect ("), line
        assert f"this rank listened on 127.0.0.1 (GLOO_SOCKET_IFNAME=lo), the rendezvous is at {first.address}:" in line
        assert "set GLOO_SOCKET_IFNAME" in line
