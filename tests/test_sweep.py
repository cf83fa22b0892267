"""Sweeps (sweep.py): real trials of the LSTM example shrunk by config, the driver as its own process, kill -9."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from optuna.storages.journal import JournalFileBackend, JournalStorage

from conftest import ROOT, read_metrics, run_cli, small_run_args

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


def test_an_unknown_search_space_key_is_one_line_naming_it(tmp_path):
    space = {"model.init_args.hiden_size": {"type": "int", "low": 8, "high": 16}}
    result = run(sweep_command(tmp_path, "--sweep", sweep_file(tmp_path / "space.json", space)))
    assert result.returncode == 2, result.stderr
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith("error: search space key model.init_args.hiden_size is not in the training config")
    )
    assert not (tmp_path / "sweep_lstm" / "study.journal").exists()


def test_a_sweep_killed_mid_way_finishes_with_every_trial_once_and_a_best_config_that_trains(tmp_path):
    """4 trials, 2 at a time: a short and a long one train, two fail on a missing names file. The driver is killed
    with SIGKILL once the short one finished and the long one is training; the same command finishes the study."""
    space = {
        "trainer.limit_train_batches": {"type": "categorical", "choices": [5, 40]},
        "data.init_args.names_path": {"type": "categorical", "choices": ["data/pet_names.txt", "data/missing.txt"]},
    }
    settings = dict(trials=4, parallel=2, sampler="grid", pruner="none")
    command = sweep_command(
        tmp_path, "--trainer.val_check_interval", "5", "--sweep", sweep_file(tmp_path / "space.json", space, **settings)
    )
    driver = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    started, finished = {}, set()
    deadline = time.monotonic() + TIMEOUT_S
    try:
        for line in driver.stderr:
            if match := STARTED.match(line):
                started[int(match[1])] = (int(match[2]), match[3])
            if match := re.match(r"sweep: trial (\d+) finished", line):
                finished.add(int(match[1]))
            long_trial = next((n for n, v in started.items() if v == (40, "data/pet_names.txt")), None)
            if finished and long_trial is not None:
                break
            assert time.monotonic() < deadline and driver.poll() is None, "the long trial never started"
        reports = tmp_path / "sweep_lstm" / f"trial_{long_trial}" / "channel" / "reports.jsonl"
        while not reports.exists():  # the long trial is training past its first validation
            assert time.monotonic() < deadline
            time.sleep(0.1)
        os.kill(driver.pid, signal.SIGKILL)
    finally:
        driver.kill()
        driver.wait()
    assert finished == {next(n for n, v in started.items() if v == (5, "data/pet_names.txt"))}

    result = run(command)
    assert result.returncode == 0, result.stderr[-3000:]
    trials = study(tmp_path).trials
    assert len(trials) == 4
    states = {trial.number: trial.state.name for trial in trials}
    good = {n for n, trial in enumerate(trials) if trial.params["data.init_args.names_path"] == "data/pet_names.txt"}
    assert all(states[n] == ("COMPLETE" if n in good else "FAIL") for n in states), states
    for trial in trials:
        if trial.state.name == "FAIL":
            assert "names file data/missing.txt does not exist" in trial.user_attrs["fail_reason"]
    (short,) = finished
    short_log = (tmp_path / "sweep_lstm" / f"trial_{short}" / "trial.log").read_text()
    assert short_log.count("resume: no checkpoint of this experiment yet") == 1 and "continuing from" not in short_log
    long_log = (tmp_path / "sweep_lstm" / f"trial_{long_trial}" / "trial.log").read_text()
    resumed_step = int(re.search(r"resume: continuing from \S+ \(step (\d+)\)", long_log)[1])
    assert resumed_step >= 5, "the interrupted trial resumed from its checkpoint, not from zero"
    assert "long" not in result.stdout and re.search(r"^trial\s+state\s+value", result.stdout, re.M)
    assert (tmp_path / "sweep_lstm" / "trials.csv").read_text().count("\n") == 5

    best = tmp_path / "sweep_lstm" / "best.yaml"
    run_cli("fit", ["--config", str(best), "--trainer.logger.init_args.save_dir", str(tmp_path / "again")])
    rows = read_metrics(tmp_path / "again")
    assert any(row.get("val/loss") for row in rows)


SPACE = {
    LR: {"type": "float", "low": 1e-4, "high": 1e-2, "log": True},
    HIDDEN: {"type": "categorical", "choices": [16, 32]},
}


def study_with_a_far_better_trial(log_dir: Path) -> None:
    """A completed trial with a value of 0 at every step: a median pruner prunes any other at its first report."""
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
            intermediate_values=dict.fromkeys(range(100), 0.0),
        )
    )


def test_every_rank_of_a_ddp_trial_gets_the_driver_values_and_a_pruned_trial_stops_on_every_rank(tmp_path):
    """A completed trial with a far better value at every step is in the study: the 2-rank trial is pruned at its
    first validation, on both ranks, and both trained with the values the driver chose."""
    space = SPACE
    study_with_a_far_better_trial(tmp_path)
    recorder = {"class_path": "tests.helpers.trial_values.RecordTrialValues", "init_args": {"directory": ""}}
    recorder["init_args"]["directory"] = str(tmp_path / "ranks")
    settings = dict(trials=2, pruner="median", pruner_startup_trials=1)
    result = run(
        sweep_command(
            tmp_path,
            *("--trainer.accelerator", "cpu", "--trainer.devices", "2", "--trainer.strategy", "ddp"),
            *("--trainer.limit_train_batches", "20", "--trainer.val_check_interval", "4"),
            *("--trainer.callbacks+", json.dumps(recorder)),
            *("--sweep", sweep_file(tmp_path / "space.json", space, **settings)),
        )
    )
    assert result.returncode == 0, result.stderr[-3000:]
    trial = study(tmp_path).trials[1]
    assert trial.state.name == "PRUNED" and list(trial.intermediate_values) == [4]
    ranks = [json.loads((tmp_path / "ranks" / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    assert ranks[0] == ranks[1]
    assert ranks[0]["lr"] == pytest.approx(trial.params[LR], rel=1e-12)
    assert ranks[0]["hidden_size"] == trial.params[HIDDEN]
    assert ranks[0]["global_step"] == 4, "pruned at the first validation, not at the end of the 20 steps"


# cookiecutter: only with dask


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
    assert [trial.state.name for trial in study(tmp_path).trials] == ["COMPLETE", "COMPLETE"]
    workers = []
    for number in (0, 1):
        log = (tmp_path / "sweep_lstm" / f"trial_{number}" / "trial.log").read_text()
        assert "dask: starting a LocalCluster with 2 worker processes" in log
        workers += re.findall(r"dask: rank \d on worker (\S+)", log)
        reports = (tmp_path / "sweep_lstm" / f"trial_{number}" / "channel" / "reports.jsonl").read_text()
        assert [json.loads(line)["step"] for line in reports.splitlines()] == [3, 6], "rank 0 reported each validation"
    assert len(set(workers)) == 4, "the concurrent trials ran on disjoint workers"


@pytest.mark.slow
def test_trials_on_an_existing_cluster_hold_their_own_workers_and_are_pruned_through_the_scheduler(tmp_path):
    """Two trials at once on a running cluster of two named workers started elsewhere: each on its own worker, each
    pruned at its first validation by a decision that went through the scheduler (no file channel)."""
    scheduler_file = tmp_path / "scheduler.json"
    elsewhere = tmp_path / "worker_machine"
    elsewhere.mkdir()
    quiet = {"cwd": elsewhere, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    python_m = [sys.executable, "-m"]
    scheduler = [*python_m, "distributed.cli.dask_scheduler", "--scheduler-file", str(scheduler_file), "--port", "0"]
    processes = [subprocess.Popen([*scheduler, "--no-dashboard"], **quiet)]
    try:
        deadline = time.monotonic() + 60
        while not scheduler_file.is_file():
            assert time.monotonic() < deadline, "the scheduler did not start"
            time.sleep(0.2)
        for name in ("machine-a", "machine-b"):
            worker = [*python_m, "distributed.cli.dask_worker", "--scheduler-file", str(scheduler_file)]
            processes.append(subprocess.Popen([*worker, "--name", name, "--nthreads", "1", "--no-dashboard"], **quiet))
        study_with_a_far_better_trial(tmp_path)
        settings = dict(trials=3, parallel=2, ranks_per_trial=1, pruner="median", pruner_startup_trials=1)
        result = run(
            sweep_command(
                tmp_path,
                *("--dask.address", json.loads(scheduler_file.read_text())["address"]),
                *("--data.init_args.names_path", str(ROOT / "data" / "pet_names.txt")),  # as on a shared disk
                *("--trainer.limit_train_batches", "20", "--trainer.val_check_interval", "4"),
                *("--sweep", sweep_file(tmp_path / "space.json", SPACE, **settings)),
            )
        )
    finally:
        for process in processes:
            process.kill()
    assert result.returncode == 0, result.stderr[-3000:]
    workers = []
    for trial in study(tmp_path).trials[1:]:
        assert trial.state.name == "PRUNED" and list(trial.intermediate_values) == [4]
        trial_dir = tmp_path / "sweep_lstm" / f"trial_{trial.number}"
        assert not (trial_dir / "channel").exists(), "reported through the scheduler, not through files"
        workers += re.findall(r"dask: rank 0 on worker (\S+)", (trial_dir / "trial.log").read_text())
    assert len(set(workers)) == 2, "the concurrent trials ran on their own workers"


# cookiecutter: end
