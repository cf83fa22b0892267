"""The Dask launcher when things go wrong, on the pet-name example (no images to draw): a killed worker, a stalled
rank, a scheduler without the project, an existing cluster's rank error and lost machine."""

import logging
import re
import site
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tests.dask.runs import (
    FAILURE_REPORT_S,
    SUBPROCESS_ENV,
    cluster_from_scheduler_file,
    losses,
    report_of_a_stalled_run,
)
from tests.helpers.faults import fault
from tests.helpers.runs import ROOT, run_cli, small_run_args


@pytest.mark.timeout(240)
def test_killed_worker_stops_the_run_and_tears_the_cluster_down(tmp_path):
    import psutil

    args = small_run_args(
        "lstm.yaml", tmp_path, None, "--trainer.max_epochs", "200", "--dask.n_workers", "2", "--dask.max_restarts", "0"
    )
    client = subprocess.Popen(
        [sys.executable, "cli.py", "fit", *args],
        cwd=ROOT,
        env=SUBPROCESS_ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output, rank_pids = [], {}
    for line in client.stdout:
        output.append(line)
        if match := re.search(r"rank (\d) on worker (\S+) \(pid (\d+)\)", line):
            rank_pids[int(match.group(1))] = (match.group(2), int(match.group(3)))
        if "dask: epoch 0" in line:
            break
    assert set(rank_pids) == {0, 1}, "".join(output)
    cluster_processes = psutil.Process(client.pid).children(recursive=True)
    rank1_worker, rank1_pid = rank_pids[1]

    killed_at = time.monotonic()
    psutil.Process(rank1_pid).kill()
    output += client.stdout.readlines()
    client.wait(timeout=FAILURE_REPORT_S)
    assert time.monotonic() - killed_at < FAILURE_REPORT_S
    assert client.returncode != 0
    (error_line,) = [line for line in output if line.startswith("error:")]
    assert f"rank 1 (Dask worker {rank1_worker}, pid {rank1_pid}) died: was killed by signal 9" in error_line
    _, still_running = psutil.wait_procs(cluster_processes, timeout=10)
    assert not still_running, f"left behind: {still_running}"


@pytest.mark.timeout(240)
def test_a_stalled_rank_fails_the_run_after_the_timeout_instead_of_hanging(tmp_path):
    report = report_of_a_stalled_run(
        small_run_args(
            "lstm.yaml",
            tmp_path,
            None,
            "--dask.n_workers",
            "2",
            "--trainer.strategy",
            "ddp",
            "--trainer.strategy.init_args.timeout",
            "0:00:15",
        )
    )
    assert re.search(
        r"rank 0 \(Dask worker \S+, pid \d+\) failed: RuntimeError: .*Timed out waiting 15000ms", report
    ), report
    assert re.search(r"still running: rank 1 \(Dask worker tls://\S+\)$", report), report


@pytest.mark.timeout(240)
@pytest.mark.slow  # CI budget: the scheduler-without-the-project test below covers the same rule
def test_a_failure_that_repeats_before_the_first_step_stops_after_two_attempts(tmp_path):
    """Every worker's environment names a network interface that does not exist: each attempt fails at the
    rendezvous, before any training step, so the second attempt's failure ends the job instead of 3 more restarts."""
    args = small_run_args("lstm.yaml", tmp_path, None, "--dask.n_workers", "2", "--dask.max_restarts", "3")
    result = subprocess.run(
        [sys.executable, "cli.py", "fit", *args],
        cwd=ROOT,
        env={**SUBPROCESS_ENV, "GLOO_SOCKET_IFNAME": "nosuchif0"},
        capture_output=True,
        text=True,
        timeout=200,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-4000:]
    assert "restart 1 of 3" in output and "restart 2 of 3" not in output, output[-4000:]
    (error_line,) = [line for line in output.splitlines() if line.startswith("error:")]
    assert re.search(r"rank \d \(Dask worker \S+, pid \d+\) failed: \w+: .*nosuchif0", error_line), error_line
    assert "a restart does not heal it" in error_line
    assert not list(tmp_path.rglob("*.ckpt"))


def environment_without_the_project(directory: Path) -> Path:
    """A Python with every dependency but not this project, as on a machine where it was never installed."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(directory)], check=True)
    python = directory / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], capture_output=True, text=True
    )
    # A path line, unlike the site directory itself, runs none of the .pth files there (the checkout's editable one).
    (Path(purelib.stdout.strip()) / "dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return python


@pytest.mark.timeout(240)
def test_a_scheduler_without_the_project_stops_the_job_with_the_missing_module(tmp_path):
    """The scheduler unpickles the task, so it needs the project: without it every attempt fails the same way."""
    python = environment_without_the_project(tmp_path / "venv")
    project_free = {"cwd": tmp_path, "env": SUBPROCESS_ENV}
    with cluster_from_scheduler_file(tmp_path, [["--no-dashboard"]], python, **project_free) as (address, _):
        args = small_run_args("lstm.yaml", tmp_path, None, "--dask.address", address, "--dask.n_workers", "1")
        result = subprocess.run(
            [sys.executable, "cli.py", "fit", *args], cwd=ROOT, env=SUBPROCESS_ENV, capture_output=True, text=True
        )
    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-4000:]
    assert "restart 1 of 3" in output and "restart 2 of 3" not in output, output[-4000:]
    (error_line,) = [line for line in output.splitlines() if line.startswith("error:")]
    assert "failed: ModuleNotFoundError: No module named 'trainrig' (RuntimeError: Error during deserialization" in (
        error_line
    )


@pytest.mark.timeout(300)
@pytest.mark.slow  # CI budget: 25 s
def test_existing_cluster_reports_a_rank_error_then_trains_after_a_restart(tmp_path, capsys, caplog):
    from distributed import LocalCluster

    caplog.set_level(logging.INFO, logger="trainrig.dask")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        address = ["--dask.address", cluster.scheduler_address]
        missing = tmp_path / "missing.txt"
        with pytest.raises(SystemExit) as exit_info:
            run_cli(
                "fit",
                small_run_args(
                    "lstm.yaml", tmp_path / "failed", None, *address, "--data.init_args.names_path", str(missing)
                ),
            )
        assert exit_info.value.code == 2
        output = capsys.readouterr()
        assert re.search(
            r"error: rank \d \(Dask worker tcp://\S+, pid \d+\): names file .*missing.txt does not exist", output.err
        ), output.err
        assert "rank 0 on worker" in caplog.text, "the launcher's log is captured"
        assert "restart" not in caplog.text + output.err, "bad input is never retried (3 restarts by default here)"
        assert "Traceback" not in caplog.text + output.err, "bad input is one line, not a traceback per rank"
        assert len([line for line in output.err.splitlines() if line.startswith("error:")]) == 1

        run_cli("fit", small_run_args("lstm.yaml", tmp_path / "ok", None, *address, "--dask.restart", "true"))
        assert len(cluster.scheduler_info["workers"]) == 2
    assert losses(tmp_path / "ok")
    assert (tmp_path / "ok" / "lstm" / "version_0" / "checkpoints" / "last.ckpt").is_file()


@pytest.mark.timeout(300)
@pytest.mark.slow  # CI budget: 36 s
def test_existing_cluster_that_lost_a_machine_goes_on_with_fewer_ranks(tmp_path):
    """Workers without a nanny, like machines: one is killed for good mid-epoch and the job ends on the other."""
    env = {**SUBPROCESS_ENV, "PYTHONPATH": str(ROOT)}
    machine = ["--no-nanny", "--nthreads", "1", "--no-dashboard"]
    with cluster_from_scheduler_file(tmp_path, [machine, machine], cwd=ROOT, env=env) as (address, workers):
        kill = fault(2, "SIGKILL", rank=1)
        args = small_run_args(
            "lstm.yaml",
            tmp_path,
            None,
            "--trainer.limit_train_batches",
            "4",
            "--dask.address",
            address,
            "--dask.n_workers",
            "2",
            "--dask.min_workers",
            "1",
            *kill,
        )
        result = subprocess.run(
            [sys.executable, "cli.py", "fit", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240
        )
        output = result.stdout + result.stderr
        assert result.returncode == 0, output[-4000:]
        assert "rank 1 (Dask worker" in output and "restart 1 of 3" in output, output[-4000:]
        assert "continuing with 1 of 2 ranks (--dask.min_workers 1)" in output, output[-4000:]
        assert sum(worker.poll() is None for worker in workers) == 1, "one machine is gone for good"
        (checkpoint,) = tmp_path.rglob("last.ckpt")
        assert torch.load(checkpoint, map_location="cpu", weights_only=False)["global_step"] == 4
