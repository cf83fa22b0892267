"""The `sweep` section of `python sweep.py`: what to search, how many trials, how to run and prune them."""

from dataclasses import dataclass, field
from typing import Literal


@dataclass
class SweepOptions:
    """A hyper-parameter sweep over `cli.py fit` runs (needs the `sweep` extra).

    Args:
        space: Dotted config keys, as on the command line, each with a distribution:
            `{type: float, low: 1e-4, high: 1e-2, log: true}`, `{type: int, low: 1, high: 4, step: 1}` or
            `{type: categorical, choices: [a, b]}`.
        metric: The logged metric each trial is judged by, read at every validation.
        direction: Whether a lower (`minimize`) or higher (`maximize`) metric is better.
        trials: How many trials the study holds when the sweep ends, counting those of earlier runs of the command.
        parallel: How many trials run at once, each its own process group with its own MASTER_PORT.
        name: The study's name and its folder `<logger save_dir>/sweep_<name>/`; by default the logger's name.
        storage: Where the study lives: by default a journal file `sweep_<name>/study.journal` (no server);
            an SQL URL (`sqlite:///sweep.db`, `postgresql://...`) for drivers on several machines.
        sampler: How the driver chooses values: `tpe`, `random`, or `grid` (every combination of categorical
            values, in the order a seeded shuffle gives).
        seed: The sampler's seed.
        pruner: Stop trials that fall behind at a validation: `median` (behind the median of completed trials
            at the same progress: epochs of training data seen, so trials of different batch sizes compare
            fairly), `hyperband`, or `none`.
        pruner_startup_trials: `median`: trials that complete before any is pruned.
        pruner_warmup_epochs: `median`: epochs (fractions too) a trial trains before it may be pruned.
        max_restarts: How often a trial stopped by a signal or a lost process (exit 143 or 134) is started again
            from its last checkpoint.
    """

    space: dict[str, dict] = field(default_factory=dict)
    metric: str = "val/loss"
    direction: Literal["minimize", "maximize"] = "minimize"
    trials: int = 20
    parallel: int = 1
    name: str | None = None
    storage: str | None = None
    sampler: Literal["tpe", "random", "grid"] = "tpe"
    seed: int = 0
    pruner: Literal["median", "hyperband", "none"] = "median"
    pruner_startup_trials: int = 2
    pruner_warmup_epochs: float = 0.0
    max_restarts: int = 1


# What a trial's error says when the study's metric is never logged: the driver stops the study on it.
METRIC_NOT_LOGGED = "is not logged at validation"
# A trial reports its progress in thousandths of an epoch (Optuna's steps are integers).
PROGRESS_PER_EPOCH = 1000
