"""Sweeps under W&B (offline): every trial is its own W&B run, all in one group named after the study."""

import json
import os
import subprocess
import sys

import optuna
from optuna.storages.journal import JournalFileBackend, JournalStorage

from tests.helpers.run_if import run_if
from tests.helpers.runs import ROOT, small_run_args

pytestmark = run_if(packages=("wandb",))

WANDB_CONFIG = str(ROOT / "configs" / "logger" / "wandb.yaml")
PROJECT = "sweep-tests"


def test_every_trial_is_a_wandb_run_in_the_study_group_with_its_own_checkpoints(tmp_path):
    from tests.wandb.records import read_offline_run

    args = small_run_args("lstm.yaml", tmp_path)
    space = {"model.init_args.hidden_size": {"type": "categorical", "choices": [16, 32]}}
    (tmp_path / "space.json").write_text(json.dumps({"space": space, "trials": 2, "parallel": 2, "pruner": "none"}))
    command = [
        *(sys.executable, str(ROOT / "sweep.py"), *args[:2], "--config", WANDB_CONFIG, *args[2:]),
        *("--trainer.logger.init_args.project", PROJECT, "--sweep", str(tmp_path / "space.json")),
    ]
    environment = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    result = subprocess.run(command, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]

    sweep_dir = tmp_path / f"sweep_{PROJECT}"
    storage = JournalStorage(JournalFileBackend(str(sweep_dir / "study.journal")))
    trials = optuna.load_study(study_name=PROJECT, storage=storage).trials
    assert [trial.state.name for trial in trials] == ["COMPLETE", "COMPLETE"]
    for trial in trials:
        trial_dir = sweep_dir / f"trial_{trial.number}"
        (run_dir,) = trial_dir.rglob("offline-run-*")
        run = read_offline_run(run_dir)
        assert (run.project, run.group, run.name) == (PROJECT, PROJECT, trial_dir.name)
        # W&B keeps jsonargparse's PositiveInt as its string
        assert str(run.config["model"]["init_args"]["hidden_size"]) == str(trial.params["model.init_args.hidden_size"])
        (checkpoint,) = (trial_dir / PROJECT).glob("*/checkpoints/last.ckpt")
        assert checkpoint.parent.parent.name == run_dir.name.rsplit("-", 1)[-1], "checkpoints in the W&B run's folder"
