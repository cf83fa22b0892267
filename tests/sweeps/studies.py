"""A sweep's study, read back from the journal the driver writes under the log folder."""

import json
from pathlib import Path

import optuna
from optuna.storages.journal import JournalFileBackend, JournalStorage

from trainrig.sweeps.options import PROGRESS_PER_EPOCH


def sweep_file(path: Path, space: dict, **settings) -> str:
    """A sweep settings file at `path` searching `space` (`sweep.py --sweep`'s format, as JSON), with `settings` beside
    it (trials, pruner, ...); returns its path as an argument."""
    path.write_text(json.dumps({"space": space, **settings}))
    return str(path)


def study(log_dir: Path, name: str) -> optuna.Study:
    """The study `sweep.py` ran for the config named `name` with its logs under `log_dir`."""
    storage = JournalStorage(JournalFileBackend(str(log_dir / f"sweep_{name}" / "study.journal")))
    return optuna.load_study(study_name=name, storage=storage)


def study_with_a_far_better_trial(log_dir: Path, name: str, params: dict, distributions: dict, epochs: int) -> None:
    """A study holding one completed trial with a value of 0 at every progress (thousandths of an epoch) of its first
    `epochs` epochs: a median pruner prunes any other trial at its first report."""
    (log_dir / f"sweep_{name}").mkdir(parents=True)
    storage = JournalStorage(JournalFileBackend(str(log_dir / f"sweep_{name}" / "study.journal")))
    optuna.create_study(study_name=name, storage=storage).add_trial(
        optuna.trial.create_trial(
            params=params,
            distributions=distributions,
            value=0.0,
            intermediate_values=dict.fromkeys(range(epochs * PROGRESS_PER_EPOCH + 1), 0.0),
        )
    )
