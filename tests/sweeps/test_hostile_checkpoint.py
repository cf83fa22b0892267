"""A hostile `last.ckpt` in a trial's folder, where the trial's `--ckpt_path last` finds it: the trial refuses it in
one line, exit 2, before its payload runs or its run folder changes; the driver records the trial as failed with that
line and does not restart it (bad input fails the same way every time), and the study goes on."""

import shutil
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from tests.helpers.hostile import hostile_checkpoint, snapshot
from tests.helpers.runs import EXAMPLE_CONFIGS, ROOT, run_cli, small_run_args
from tests.sweeps.studies import study, sweep_file
from trainrig.sweeps.trials import LOG

CONFIG = EXAMPLE_CONFIGS[0]
NAME = Path(CONFIG).stem
LEARNING_RATE = {"model.init_args.optimizer.init_args.lr": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True}}


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory, shapes_root) -> Path:
    """One short run's folder (`version_0`, with `checkpoints/last.ckpt`)."""
    logs = tmp_path_factory.mktemp("trained")
    run_cli("fit", small_run_args(CONFIG, logs, shapes_root))
    return next(logs.rglob("last.ckpt")).parent.parent


def test_a_hostile_checkpoint_in_a_trial_folder_fails_that_trial_and_runs_nothing(trained_run, tmp_path, shapes_root):
    marker, logs = tmp_path / "marker", tmp_path / "logs"
    trial = logs / f"sweep_{NAME}" / "trial_0"
    trial.mkdir(parents=True, mode=0o700)
    shutil.copytree(trained_run, trial / "version_0")
    evil = hostile_checkpoint(trial / "version_0" / "checkpoints" / "last.ckpt", marker)
    before = snapshot(trial / "version_0")
    # A space of its own: a project whose examples are gone has no configs/sweeps/ file for the tests' own task.
    space = ["--sweep", sweep_file(tmp_path / "space.json", LEARNING_RATE, trials=1)]
    command = [sys.executable, str(ROOT / "sweep.py"), *small_run_args(CONFIG, logs, shapes_root), *space]
    driver = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)

    assert not marker.exists(), "the payload ran"
    assert driver.returncode == 0, driver.stderr[-3000:]
    output = (trial / LOG).read_text().splitlines()
    errors = [line for line in output if line.startswith("error: ")]
    assert len(errors) == 1 and output[-1] == errors[0] and str(evil) in errors[0], output[-20:]
    assert "--weights_only false" in errors[0]
    assert snapshot(trial / "version_0") == before, "the trial wrote into its run folder"
    assert [path.name for path in trial.glob("version_*")] == ["version_0"], "the trial started another run folder"
    assert "restart" not in driver.stderr
    (failed,) = study(logs, NAME).trials
    assert failed.state == optuna.trial.TrialState.FAIL
    assert failed.user_attrs["fail_reason"] == f"exit 2: {errors[0].removeprefix('error: ')}"
