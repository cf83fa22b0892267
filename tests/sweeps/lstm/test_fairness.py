"""Sweeps judge trials fairly: a metric no trial logs stops the study at once, trials of different batch sizes are
compared at the same progress through the data, and a trial's seconds are the time its processes ran."""

import optuna
import pytest

from tests.sweeps.lstm.runs import run, sweep_command
from tests.sweeps.studies import study, sweep_file
from trainrig.sweeps.driver import ProgressMedianPruner
from trainrig.sweeps.options import PROGRESS_PER_EPOCH

BATCH_SIZE = "data.init_args.batch_size"


def test_a_misspelled_metric_stops_the_study_at_the_first_validation_of_the_first_trial(tmp_path):
    space = {"model.init_args.hidden_size": {"type": "categorical", "choices": [16, 32]}}
    settings = dict(metric="val/nosuch", trials=3, sampler="grid", pruner="none")
    command = sweep_command(
        tmp_path,
        *("--trainer.limit_train_batches", "6", "--trainer.val_check_interval", "2"),
        *("--sweep", sweep_file(tmp_path / "space.json", space, **settings)),
    )
    result = run(command)
    assert result.returncode == 2, result.stderr[-3000:]
    line = result.stderr.splitlines()[-1]
    assert line.startswith("error: --sweep.metric val/nosuch is not logged at validation (step 2; logged: ")
    assert "val/loss" in line, "the error lists the metrics that are logged"
    (only,) = study(tmp_path, "lstm").trials
    assert only.state.name == "FAIL"
    assert not (tmp_path / "sweep_lstm" / "trial_1").exists() and not (tmp_path / "sweep_lstm" / "best.yaml").exists()


@pytest.mark.slow
def test_trials_of_different_batch_sizes_report_at_the_same_progress_and_have_plots(tmp_path):
    """Batch 64 and 256 over the same 0.4% of the data (24 and 6 batches): the same progress (half an epoch, one
    epoch) at both validations. Two trials of 30 batches: about 90 s on 2 shared cores, so marked slow."""
    space = {BATCH_SIZE: {"type": "categorical", "choices": [64, 256]}}
    settings = dict(trials=2, sampler="grid", pruner="none")
    command = sweep_command(
        tmp_path,
        *("--trainer.limit_train_batches", "0.004", "--trainer.val_check_interval", "0.5"),
        *("--sweep", sweep_file(tmp_path / "space.json", space, **settings)),
    )
    result = run(command)
    assert result.returncode == 0, result.stderr[-3000:]
    trials = study(tmp_path, "lstm").trials
    reported = {trial.params[BATCH_SIZE]: sorted(trial.intermediate_values) for trial in trials}
    assert reported[64] == reported[256] == [PROGRESS_PER_EPOCH // 2, PROGRESS_PER_EPOCH], reported
    assert all(0 < trial.user_attrs["seconds"] <= trial.duration.total_seconds() for trial in trials)
    assert (tmp_path / "sweep_lstm" / "history.png").stat().st_size > 0, "plots are drawn by the sweep extra"


def frozen(values: dict[int, float], state=optuna.trial.TrialState.COMPLETE) -> optuna.trial.FrozenTrial:
    distribution = optuna.distributions.FloatDistribution(0, 1)
    return optuna.trial.create_trial(
        state=state,
        value=list(values.values())[-1] if state == optuna.trial.TrialState.COMPLETE else None,
        params={"x": 0.5},
        distributions={"x": distribution},
        intermediate_values=values,
    )


@pytest.mark.parametrize(
    ("running", "pruned"),
    [
        ({470: 0.9}, True),  # worse than both completed trials had reached by 470/1000 of an epoch
        ({470: 0.1}, False),
        ({100: 0.9}, False),  # before either completed trial reported: nothing to compare with
    ],
)
def test_the_pruner_compares_with_what_other_trials_had_reached_at_the_same_progress(running, pruned):
    """Completed trials reported at 250 and 500 (batch 256) and at 400 (batch 1024): at 470 the first counts with
    its value at 250, the second with its value at 400, although neither reported at 470."""
    study = optuna.create_study(pruner=ProgressMedianPruner(n_startup_trials=1, n_warmup_steps=0))
    study.add_trial(frozen({250: 0.5, 500: 0.4}))
    study.add_trial(frozen({400: 0.6, 800: 0.5}))
    trial = study.ask()
    for step, value in running.items():
        trial.report(value, step)
    assert trial.should_prune() is pruned
