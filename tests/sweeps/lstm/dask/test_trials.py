"""Sweep trials that are Dask jobs: on their own embedded clusters, and on one existing cluster of named workers."""

import json
import re

import pytest

from tests.dask.runs import cluster_from_scheduler_file
from tests.helpers.runs import ROOT
from tests.sweeps.lstm.runs import (
    LR,
    SPACE,
    run,
    study_with_a_far_better_trial,
    sweep_command,
)
from tests.sweeps.studies import study, sweep_file


@pytest.mark.slow
def test_concurrent_trials_each_run_on_their_own_embedded_dask_cluster(tmp_path):
    space = {LR: {"type": "float", "low": 1e-4, "high": 1e-2, "log": True}}
    settings = dict(trials=2, parallel=2, pruner="none", ranks_per_trial=2)
    result = run(
        sweep_command(
            tmp_path,
            *("--trainer.limit_train_batches", "6", "--trainer.val_check_interval", "3"),
            *("--sweep", sweep_file(tmp_path / "space.json", space, **settings)),
        )
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert [trial.state.name for trial in study(tmp_path, "lstm").trials] == ["COMPLETE", "COMPLETE"]
    workers = []
    for number in (0, 1):
        log = (tmp_path / "sweep_lstm" / f"trial_{number}" / "trial.log").read_text()
        assert "dask: starting a LocalCluster with 2 worker processes" in log
        workers += re.findall(r"dask: rank \d on worker (\S+)", log)
        reports = (tmp_path / "sweep_lstm" / f"trial_{number}" / "channel" / "reports.jsonl").read_text()
        progress = [json.loads(line)["step"] for line in reports.splitlines()]
        assert progress == [500, 1000], "rank 0 reported each validation (3 and 6 of 6 batches: half and one epoch)"
    assert len(set(workers)) == 4, "the concurrent trials ran on disjoint workers"


@pytest.mark.slow  # CI budget: 44 s
def test_trials_on_an_existing_cluster_hold_their_own_workers_and_are_pruned_through_the_scheduler(tmp_path):
    """Two trials at once on a running cluster of two named workers started elsewhere: each on its own worker, each
    pruned at its first validation by a decision that went through the scheduler (no file channel)."""
    elsewhere = tmp_path / "worker_machine"
    elsewhere.mkdir()
    machines = [["--name", name, "--nthreads", "1", "--no-dashboard"] for name in ("machine-a", "machine-b")]
    with cluster_from_scheduler_file(tmp_path, machines, cwd=elsewhere) as (address, _):
        study_with_a_far_better_trial(tmp_path)
        settings = dict(trials=3, parallel=2, ranks_per_trial=1, pruner="median", pruner_startup_trials=1)
        result = run(
            sweep_command(
                tmp_path,
                *("--dask.address", address),
                *("--data.init_args.names_path", str(ROOT / "data" / "pet_names.txt")),  # as on a shared disk
                *("--trainer.limit_train_batches", "20", "--trainer.val_check_interval", "4"),
                *("--sweep", sweep_file(tmp_path / "space.json", SPACE, **settings)),
            )
        )
    assert result.returncode == 0, result.stderr[-3000:]
    workers = []
    for trial in study(tmp_path, "lstm").trials[1:]:
        assert trial.state.name == "PRUNED" and list(trial.intermediate_values) == [200]  # 4 of 20 batches: 0.2 epochs
        trial_dir = tmp_path / "sweep_lstm" / f"trial_{trial.number}"
        assert not (trial_dir / "channel").exists(), "reported through the scheduler, not through files"
        workers += re.findall(r"dask: rank 0 on worker (\S+)", (trial_dir / "trial.log").read_text())
    assert len(set(workers)) == 2, "the concurrent trials ran on their own workers"
