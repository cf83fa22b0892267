"""Sweeps of the pet-name example for the tests: the driver's command shrunk by config, search-space files, the study
it leaves."""

import json
import re
import subprocess
import sys
from pathlib import Path

import optuna
from optuna.storages.journal import JournalFileBackend, JournalStorage

from tests.helpers.runs import ROOT, small_run_args
from trainrig.sweeps.options import PROGRESS_PER_EPOCH

LR = "model.init_args.optimizer.init_args.lr"
HIDDEN = "model.init_args.hidden_size"
TIMEOUT_S = 240
STARTED = re.compile(r"sweep: trial (\d+) started: limit_train_batches=(\d+), names_path=(\S+) \(log")


def sweep_command(log_dir: Path, *extra: str) -> list[str]:
    return [sys.executable, str(ROOT / "sweep.py"), *small_run_args("lstm.yaml", log_dir), *extra]


def sweep_file(path: Path, space: dict, **settings) -> str:
    path.write_text(json.dumps({"space": space, **settings}))
    return str(path)


def study(log_dir: Path, name: str = "lstm") -> optuna.Study:
    storage = JournalStorage(JournalFileBackend(str(log_dir / f"sweep_{name}" / "study.journal")))
    return optuna.load_study(study_name=name, storage=storage)


def run(command: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S)


SPACE = {
    LR: {"type": "float", "low": 1e-4, "high": 1e-2, "log": True},
    HIDDEN: {"type": "categorical", "choices": [16, 32]},
}


def study_with_a_far_better_trial(log_dir: Path) -> None:
    """A completed trial with a value of 0 at every progress (thousandths of an epoch) over its first two epochs: a
    median pruner prunes any other at its first report."""
    distributions = {
        LR: optuna.distributions.FloatDistribution(1e-4, 1e-2, log=True),
        HIDDEN: optuna.distributions.CategoricalDistribution([16, 32]),
    }
    (log_dir / "sweep_lstm").mkdir()
    storage = JournalStorage(JournalFileBackend(str(log_dir / "sweep_lstm" / "study.journal")))
    optuna.create_study(study_name="lstm", storage=storage).add_trial(
        optuna.trial.create_trial(
            params={LR: 1e-3, HIDDEN: 16},
            distributions=distributions,
            value=0.0,
            intermediate_values=dict.fromkeys(range(2 * PROGRESS_PER_EPOCH + 1), 0.0),
        )
    )
