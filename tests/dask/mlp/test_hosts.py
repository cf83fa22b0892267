"""The Dask launcher across emulated hosts, started as docs/dask.md says: scheduler and client on one host, workers
on others; a lost host."""

import os
import signal
import subprocess
import time

import pytest

from tests.dask.hosts import start_dask
from tests.helpers.installed import installed_python
from tests.helpers.mlp.multi_host_runs import (
    RUN_TIMEOUT_S,
    finished,
    job_args,
    losses,
    one_host_losses,
)
from tests.helpers.ran import assert_ran_as
from tests.helpers.run_dirs import assert_same_weights, final_weights
from tests.helpers.run_if import run_if
from tests.helpers.runs import ROOT
from trainrig.testing.hosts import EmulatedHosts


@run_if(emulated_hosts=True)
@pytest.mark.slow  # CI budget: 46 s; a lost host across hosts stays
def test_dask_scheduler_and_client_on_one_host_workers_on_two_others():
    python = installed_python()
    with EmulatedHosts(3) as hosts:
        client_host, *worker_hosts = hosts
        scheduler, _, _ = start_dask(python, client_host, worker_hosts)
        command = [python, ROOT / "cli.py", "fit", *job_args(client_host)]
        command += [
            "--dask.address",
            scheduler,
            "--dask.n_workers",
            "2",
            "--trainer.strategy",
            "ddp",
            "--trainer.strategy.init_args.timeout",
            "0:01:00",
        ]
        client = client_host.popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        (output,) = finished([client])
        assert client.returncode == 0, output
        assert_ran_as(
            client_host.workdir / "logs", strategy="DDPStrategy", processes=2, environment="DaskRankEnvironment"
        )
        assert losses(client_host.workdir / "logs") == one_host_losses()
        for host in worker_hosts:
            assert not (host.workdir / "logs").exists()  # results come back to the client's host only


@run_if(emulated_hosts=True)
@pytest.mark.slow  # CI budget: 52 s; torchrun losing a host across hosts stays
def test_dask_pipeline_across_hosts_loses_a_host_and_ends_with_the_uninterrupted_weights():
    """Pipeline stages on two worker hosts; once the client holds a checkpoint, every process of one worker host
    (worker and nanny) is killed and a worker started there again, as systemd (`Restart=always`) would; the client
    restarts the group from its checkpoint (`--dask.max_restarts`) and ends with the uninterrupted job's weights."""
    python = installed_python()
    weights = {}
    with EmulatedHosts(3) as hosts:
        client_host, *worker_hosts = hosts
        scheduler, worker, workers = start_dask(python, client_host, worker_hosts)
        quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for run in ("uninterrupted", "lost host"):
            logs = client_host.workdir / f"logs-{run.replace(' ', '-')}"
            command = [python, ROOT / "cli.py", "fit", *job_args(client_host), "--trainer.logger.init_args.save_dir"]
            command += [logs.name, "--trainer.strategy", "pipeline", "--trainer.max_epochs", "3"]
            command += ["--trainer.limit_train_batches", "10", "--trainer.deterministic", "true"]
            command += ["--trainer.strategy.init_args.timeout", "0:01:00", "--dask.address", scheduler]
            command += ["--dask.n_workers", "2", "--dask.max_restarts", "1"]
            client = client_host.popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if run == "lost host":
                deadline = time.monotonic() + RUN_TIMEOUT_S
                while not any(logs.rglob("last.ckpt")) and client.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.1)
                lost = worker_hosts[1]
                os.killpg(workers[1].pid, signal.SIGKILL)  # the nanny and its worker: all of the host's processes
                workers[1].wait()
                workers[1] = lost.popen(worker, **quiet)
            (output,) = finished([client])
            assert client.returncode == 0, output[-4000:]
            assert_ran_as(logs, strategy="PipelineStrategy", processes=2, environment="DaskRankEnvironment")
            if run == "lost host":
                assert "restart 1 of 1" in output, output[-4000:]
            weights[run] = final_weights(logs)
    assert_same_weights(weights["lost host"], weights["uninterrupted"])
