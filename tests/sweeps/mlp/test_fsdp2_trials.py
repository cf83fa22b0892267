"""A sweep (sweep.py) whose trials run under fsdp2: two trials at once, each on two processes of its own, each
writing sharded checkpoints that record the strategy, and each judged by its own last validation."""

import json
import subprocess
import sys

import optuna
import pytest
from optuna.storages.journal import JournalFileBackend, JournalStorage

from tests.helpers.mlp.tiny_mlp import mlp_args, write_mlp_settings
from tests.helpers.ran import assert_ran_as
from tests.helpers.runs import ROOT
from tests.helpers.sharded_runs import FSDP2, shard_files, sharded_checkpoint
from tests.helpers.strategy_runs import logged

LR = "model.init_args.optimizer.init_args.lr"


@pytest.mark.slow  # CI budget: 32 s
def test_a_sweep_runs_two_fsdp2_trials_at_once_each_sharded_over_its_own_two_processes(tmp_path, shapes_root):
    settings = write_mlp_settings(tmp_path, shapes_root, epochs=1, batch_size=16)
    space = tmp_path / "space.json"
    space.write_text(
        json.dumps({"space": {LR: {"type": "categorical", "choices": [0.05, 0.1]}}, "trials": 2, "parallel": 2})
    )
    sweep = [sys.executable, str(ROOT / "sweep.py"), *mlp_args(settings, tmp_path, *FSDP2)]
    result = subprocess.run(
        [*sweep, "--sweep", str(space), "--sweep.sampler", "grid", "--sweep.pruner", "none"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    storage = JournalStorage(JournalFileBackend(str(tmp_path / "sweep_mlp" / "study.journal")))
    trials = optuna.load_study(study_name="mlp", storage=storage).trials
    assert sorted(trial.params[LR] for trial in trials) == [0.05, 0.1]
    for trial in trials:
        directory = tmp_path / "sweep_mlp" / f"trial_{trial.number}"
        assert trial.state.name == "COMPLETE", (directory / "trial.log").read_text()[-3000:]
        assert_ran_as(directory, strategy="FSDP2Strategy", processes=2, data_parallel=2)
        assert shard_files(sharded_checkpoint(directory)) == [".metadata", "__0_0.distcp", "__1_0.distcp", "meta.pt"]
        assert trial.value == logged(directory, "val/loss")[-1]
