"""Sweeps (sweep.py): real trials of the LSTM example shrunk by config, the driver as its own process, kill -9."""

import json
import os
import re
import signal
import subprocess
import time

import pytest

from tests.helpers.runs import ROOT, read_metrics, run_cli
from tests.sweeps.lstm.runs import (
    HIDDEN,
    LR,
    SPACE,
    STARTED,
    TIMEOUT_S,
    run,
    study_with_a_far_better_trial,
    sweep_command,
)
from tests.sweeps.studies import study, sweep_file
from trainrig.testing.load import LOAD_MODES, saturated_cpu


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


@pytest.mark.slow  # CI budget: 71 s idle
@pytest.mark.parametrize("load", ["idle", "saturated"])
def test_a_sweep_killed_mid_way_finishes_with_every_trial_once_and_a_best_config_that_trains(tmp_path, load):
    """4 trials, 2 at a time: a short and a long one train, two fail on a missing names file. The driver is killed
    with SIGKILL once the short one finished and the long one is training; the same command finishes the study.
    `saturated`: from the first driver's start to the second's end every core is kept busy (trainrig/testing/load.py):
    the killed driver's trials stop slowly, and the second driver waits for them while they work."""
    space = {
        "trainer.limit_train_batches": {"type": "categorical", "choices": [5, 40]},
        "data.init_args.names_path": {"type": "categorical", "choices": ["data/pet_names.txt", "data/missing.txt"]},
    }
    settings = dict(trials=4, parallel=2, sampler="grid", pruner="none")
    timer = {"class_path": "tests.sweeps.lstm.trial_values.RecordTrainingTimes", "init_args": {"directory": ""}}
    timer["init_args"]["directory"] = str(tmp_path / "times")
    command = sweep_command(
        tmp_path,
        *("--trainer.val_check_interval", "5", "--trainer.callbacks+", json.dumps(timer)),
        *("--sweep", sweep_file(tmp_path / "space.json", space, **settings)),
    )
    with saturated_cpu(LOAD_MODES[load]):
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
    trials = study(tmp_path, "lstm").trials
    assert len(trials) == 4
    states = {trial.number: trial.state.name for trial in trials}
    good = {n for n, trial in enumerate(trials) if trial.params["data.init_args.names_path"] == "data/pet_names.txt"}
    assert all(states[n] == ("COMPLETE" if n in good else "FAIL") for n in states), states
    for trial in trials:
        if trial.state.name == "FAIL":
            assert "names file data/missing.txt does not exist" in trial.user_attrs["fail_reason"]
    (short,) = finished
    records = [(path.name.split("-")[0], json.loads(path.read_text())) for path in (tmp_path / "times").iterdir()]
    trained = {}  # each trial's first process: when it trained, as it recorded it
    for folder, times in sorted(records, key=lambda record: record[1]["start"]):
        trained.setdefault(int(folder.removeprefix("trial_")), times)
    assert trained.keys() == good, trained
    first, second = trained[short], trained[long_trial]
    assert max(first["start"], second["start"]) < min(first["end"], second["end"]), (
        f"the two training trials did not run at the same time: {trained}"
    )
    short_log = (tmp_path / "sweep_lstm" / f"trial_{short}" / "trial.log").read_text()
    assert short_log.count("resume: no checkpoint of this experiment yet") == 1 and "continuing from" not in short_log
    long_log = (tmp_path / "sweep_lstm" / f"trial_{long_trial}" / "trial.log").read_text()
    resumed_step = int(re.search(r"resume: continuing from \S+ \(step (\d+)\)", long_log)[1])
    assert resumed_step >= 5, "the interrupted trial resumed from its checkpoint, not from zero"
    resumed = trials[long_trial]
    assert 0 < resumed.user_attrs["seconds"] < resumed.duration.total_seconds(), "the driver's downtime is not counted"
    assert "long" not in result.stdout and re.search(r"^trial\s+state\s+value", result.stdout, re.M)
    assert (tmp_path / "sweep_lstm" / "trials.csv").read_text().count("\n") == 5

    best = tmp_path / "sweep_lstm" / "best.yaml"
    run_cli("fit", ["--config", str(best), "--trainer.logger.init_args.save_dir", str(tmp_path / "again")])
    rows = read_metrics(tmp_path / "again")
    assert any(row.get("val/loss") for row in rows)


@pytest.mark.slow  # CI budget: 29 s
def test_every_rank_of_a_ddp_trial_gets_the_driver_values_and_a_pruned_trial_stops_on_every_rank(tmp_path):
    """A completed trial with a far better value at every step is in the study: the 2-rank trial is pruned at its
    first validation, on both ranks, and both trained with the values the driver chose."""
    space = SPACE
    study_with_a_far_better_trial(tmp_path)
    recorder = {"class_path": "tests.sweeps.lstm.trial_values.RecordTrialValues", "init_args": {"directory": ""}}
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
    trial = study(tmp_path, "lstm").trials[1]
    assert trial.state.name == "PRUNED" and list(trial.intermediate_values) == [200]  # 4 of 20 batches: 0.2 epochs
    ranks = [json.loads((tmp_path / "ranks" / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    assert ranks[0] == ranks[1]
    assert ranks[0]["lr"] == pytest.approx(trial.params[LR], rel=1e-12)
    assert ranks[0]["hidden_size"] == trial.params[HIDDEN]
    assert ranks[0]["global_step"] == 4, "pruned at the first validation, not at the end of the 20 steps"
