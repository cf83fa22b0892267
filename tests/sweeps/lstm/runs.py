"""Sweeps of the pet-name example for the tests: the driver's command shrunk by config, search-space files, the study
it leaves."""

import re
import subprocess
import sys
from pathlib import Path

import optuna

from tests.helpers.runs import ROOT, small_run_args
from tests.sweeps import studies

LR = "model.init_args.optimizer.init_args.lr"
HIDDEN = "model.init_args.hidden_size"
TIMEOUT_S = 240
STARTED = re.compile(r"sweep: trial (\d+) started: limit_train_batches=(\d+), names_path=(\S+) \(log")


def sweep_command(log_dir: Path, *extra: str) -> list[str]:
    return [sys.executable, str(ROOT / "sweep.py"), *small_run_args("lstm.yaml", log_dir), *extra]


def run(command: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S)


SPACE = {
    LR: {"type": "float", "low": 1e-4, "high": 1e-2, "log": True},
    HIDDEN: {"type": "categorical", "choices": [16, 32]},
}


def study_with_a_far_better_trial(log_dir: Path) -> None:
    """`studies.study_with_a_far_better_trial` over SPACE's first two epochs."""
    distributions = {
        LR: optuna.distributions.FloatDistribution(1e-4, 1e-2, log=True),
        HIDDEN: optuna.distributions.CategoricalDistribution([16, 32]),
    }
    studies.study_with_a_far_better_trial(log_dir, "lstm", {LR: 1e-3, HIDDEN: 16}, distributions, epochs=2)
