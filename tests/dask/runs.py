"""Dask launcher runs for the tests: its runs against the processes Lightning launches, a stalled rank's report, and a
cluster started from a scheduler file as on machines the launcher did not start."""

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.helpers.runs import ROOT, read_metrics, run_cli

__all__ = [
    "FAILURE_REPORT_S",
    "SUBPROCESS_ENV",
    "cluster_from_scheduler_file",
    "losses",
    "report_of_a_stalled_run",
    "start_lightning_launched",
    "wait_for_success",
]

SUBPROCESS_ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
FAILURE_REPORT_S = 60
SCHEDULER_START_S = 60


def losses(log_dir: Path) -> list[float]:
    return [float(row["train/loss"]) for row in read_metrics(log_dir) if row.get("train/loss")]


def report_of_a_stalled_run(args: list[str]) -> str:
    """Run with rank 1 stalling after its first batch; the run must fail in time (from the stall), and this returns its
    error report.

    No restart: the time bounds one attempt, which a restart would repeat.
    """
    with tempfile.TemporaryDirectory() as marks:
        mark = Path(marks) / "stalled_at"
        stalling = ["--trainer.callbacks+=tests.dask.stalling_rank.StallingRank"]
        stalling += ["--trainer.callbacks.init_args.mark", str(mark)]
        with pytest.raises(SystemExit) as exit_info:
            run_cli("fit", [*args, "--dask.max_restarts", "0", *stalling])
        assert time.time() - float(mark.read_text()) < FAILURE_REPORT_S, "the run failed too long after the stall"
    return str(exit_info.value.code)


def start_lightning_launched(args: list[str]) -> subprocess.Popen:
    """The same run with the processes launched by Lightning itself, to compare a Dask run against."""
    command = [sys.executable, "cli.py", "fit", *args]
    return subprocess.Popen(
        command, cwd=ROOT, env=SUBPROCESS_ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def wait_for_success(baseline: subprocess.Popen) -> None:
    output, _ = baseline.communicate(timeout=300)
    assert baseline.returncode == 0, output[-3000:]


@contextmanager
def cluster_from_scheduler_file(
    directory: Path, workers: list[list[str]], python: Path | str = sys.executable, **popen
) -> Iterator[tuple[str, list[subprocess.Popen]]]:
    """A Dask scheduler writing `directory/scheduler.json` and one worker per entry of `workers` (that worker's own
    options) reading it, each its own process with `popen`'s arguments and no output; yields the scheduler's address
    and the worker processes, and kills them all at the end."""
    scheduler_file = directory / "scheduler.json"
    popen = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, **popen}
    scheduler = [python, "-m", "distributed.cli.dask_scheduler", "--scheduler-file", str(scheduler_file)]
    processes = [subprocess.Popen([*scheduler, "--port", "0", "--no-dashboard"], **popen)]
    try:
        deadline = time.monotonic() + SCHEDULER_START_S
        while not scheduler_file.is_file():
            assert time.monotonic() < deadline and processes[0].poll() is None, "the Dask scheduler did not start"
            time.sleep(0.2)
        worker = [python, "-m", "distributed.cli.dask_worker", "--scheduler-file", str(scheduler_file)]
        processes += [subprocess.Popen([*worker, *options], **popen) for options in workers]
        yield json.loads(scheduler_file.read_text())["address"], processes[1:]
    finally:
        for process in processes:
            process.kill()
            process.wait(timeout=30)
