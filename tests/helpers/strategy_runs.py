"""Helpers for the strategy tests: real `cli.py` runs in fresh processes, and what they leave on disk."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.helpers import ROOT
from tests.helpers.runs import LAUNCHER_VARIABLES, read_metrics, run_cli

# How close a strategy's results must be to one device's (float sums in another order).
TOLERANCE = 1e-5
# Stages each multi-stage schedule runs a model in, on two processes (two per process where it interleaves).
SCHEDULE_STAGES = {
    "1F1B": 2,
    "Interleaved1F1B": 4,
    "LoopedBFS": 4,
    "InterleavedZeroBubble": 4,
    "ZBVZeroBubble": 4,
    "DualPipeV": 4,
}


def run_processes(subcommand: str, args: list[str], timeout: float = 240, cwd: Path = ROOT) -> tuple[int, str]:
    """`python cli.py ...` in its own process group, so a hung multi-process run is killed whole."""
    # A fresh command, as a user starts it: no rank variables a launcher left in this process.
    inherited = {name: value for name, value in os.environ.items() if not LAUNCHER_VARIABLES.fullmatch(name)}
    env = {**inherited, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "cli.py"), subcommand, *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        pytest.fail(f"cli.py {subcommand} did not finish in {timeout} s:\n{output[-3000:]}")
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return process.returncode, output


def run_ok(subcommand: str, args: list[str]) -> str:
    code, output = run_processes(subcommand, args)
    assert code == 0, output[-4000:]
    return output


def checkpoint(log_dir: Path, name: str = "last.ckpt") -> dict:
    (path,) = log_dir.rglob(name)
    return torch.load(path, map_location="cpu", weights_only=False)


def checkpoint_path(log_dir: Path, name: str) -> Path:
    (path,) = log_dir.rglob(name)
    return path


def largest_difference(first: dict[str, torch.Tensor], second: dict[str, torch.Tensor]) -> float:
    assert first.keys() == second.keys()
    return max(float((first[key].float() - second[key].float()).abs().max()) for key in first)


def optimizer_tensors(state: dict) -> dict[str, torch.Tensor]:
    """Optimizer state flattened to {"<param index>.<name>": tensor}, comparable across strategies."""
    assert len(state["param_groups"]) == 1
    return {
        f"{index}.{name}": value
        for index, entry in state["state"].items()
        for name, value in entry.items()
        if torch.is_tensor(value)
    }


def expect_user_error(capsys, args: list[str], message: str) -> None:
    with pytest.raises(SystemExit) as exit_info:
        run_cli("fit", args)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def logged(log_dir: Path, key: str) -> list[float]:
    return [float(row[key]) for row in read_metrics(log_dir) if row.get(key)]
