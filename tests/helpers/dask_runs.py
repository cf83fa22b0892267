"""Dask launcher runs for the tests: its runs against the processes Lightning launches, and a stalled rank's report."""

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.helpers.runs import ROOT, read_metrics, run_cli

__all__ = [
    "FAILURE_REPORT_S",
    "SUBPROCESS_ENV",
    "losses",
    "report_of_a_stalled_run",
    "start_lightning_launched",
    "wait_for_success",
]

SUBPROCESS_ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
FAILURE_REPORT_S = 60


def losses(log_dir: Path) -> list[float]:
    return [float(row["train/loss"]) for row in read_metrics(log_dir) if row.get("train/loss")]


def report_of_a_stalled_run(args: list[str]) -> str:
    """Run with rank 1 stalling after its first batch; the run must fail in time (from the stall), and this returns its
    error report.

    No restart: the time bounds one attempt, which a restart would repeat.
    """
    with tempfile.TemporaryDirectory() as marks:
        mark = Path(marks) / "stalled_at"
        stalling = ["--trainer.callbacks+=tests.helpers.stalling_rank.StallingRank"]
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
