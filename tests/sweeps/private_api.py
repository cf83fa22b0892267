"""What the sweeps touch."""

import optuna


def _frozen_trial() -> optuna.trial.FrozenTrial:
    study = optuna.create_study()
    study.tell(study.ask(), 0.0)
    return study.trials[0]


ATTRIBUTES = [
    ("optuna FrozenTrial", _frozen_trial, "_trial_id", "trainrig/sweeps/driver.py (a trial a stopped driver left)")
]
