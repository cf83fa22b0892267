"""The one process that samples: an Optuna study asked for trials and told their results, trials run as processes.

A trial is `cli.py fit --config base.yaml <sampled values> --ckpt_path last`, logging into
`sweep_<name>/trial_<n>/`. `--ckpt_path last` makes every start of a trial after the first (a restart after a
lost process, or a trial the previous driver left running) continue from its last checkpoint.
"""

import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import optuna
from typing_extensions import override

from trainrig.errors import UserInputError, exit_status
from trainrig.sweeps import trials
from trainrig.sweeps.channel import DriverSide
from trainrig.sweeps.local_trials import LocalPlacement
from trainrig.sweeps.options import METRIC_NOT_LOGGED, PROGRESS_PER_EPOCH, SweepOptions
from trainrig.sweeps.space import as_overrides
from trainrig.sweeps.trial_logging import TrialLogging

POLL_S = 0.1
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
STATE = optuna.trial.TrialState
# The trial's user attribute holding the seconds its processes ran, across restarts and drivers.
SECONDS = "seconds"


@dataclass
class RunningTrial:
    trial: optuna.Trial
    directory: Path
    channel: DriverSide
    port: int
    process: subprocess.Popen | None = None  # or what the placement's `start` returns: anything with `poll()`
    placed: list[str] = field(default_factory=list)  # the launcher arguments its placement gave it
    reported: set = field(default_factory=set)
    last_value: float | None = None
    pruned: bool = False
    restarts: int = 0
    seconds: float = 0.0  # how long its earlier processes ran
    started_at: float = 0.0  # time.monotonic() when its process started


def open_study(options: SweepOptions, name: str, sweep_dir: Path, space: dict) -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = options.storage if options.storage is not None else journal(sweep_dir / "study.journal")
    sampler, pruner = _sampler(options, space), _pruner(options)
    try:  # a study to continue, opened without a write (create_study would log a second creation first)
        return optuna.load_study(study_name=name, storage=storage, sampler=sampler, pruner=pruner)
    except KeyError:  # none of that name yet
        return optuna.create_study(
            study_name=name, storage=storage, sampler=sampler, pruner=pruner, direction=options.direction
        )


def journal(path: Path) -> "optuna.storages.JournalStorage":
    """The study's journal, read whole (Optuna replays it when it opens it); a damaged one is a one-line error. Optuna
    skips a last line cut short by a crash, not one in the middle."""
    from optuna.storages.journal import JournalFileBackend, JournalStorage

    try:
        return JournalStorage(JournalFileBackend(str(path)))
    except (ValueError, KeyError, TypeError) as error:  # undecodable JSON or bytes, or a record missing its fields
        raise UserInputError(
            f"{path} is not a readable Optuna journal ({type(error).__name__}: {error}); restore it from a copy, or "
            "move it away to start the study again"
        ) from None


def _sampler(options: SweepOptions, space: dict) -> optuna.samplers.BaseSampler:
    if options.sampler == "grid":
        return AskTellGridSampler({key: list(d.choices) for key, d in space.items()}, seed=options.seed)
    if options.sampler == "random":
        return optuna.samplers.RandomSampler(seed=options.seed)
    return optuna.samplers.TPESampler(seed=options.seed)


class AskTellGridSampler(optuna.samplers.GridSampler):
    """GridSampler without its `study.stop()` once the grid is done, which works only inside `study.optimize` and
    raises after `study.tell`; the driver counts the trials itself."""

    @override
    def after_trial(self, study, trial, state, values) -> None:
        pass


def _pruner(options: SweepOptions) -> optuna.pruners.BasePruner:
    if options.pruner == "median":
        return ProgressMedianPruner(
            options.pruner_startup_trials, round(options.pruner_warmup_epochs * PROGRESS_PER_EPOCH)
        )
    if options.pruner == "hyperband":
        return optuna.pruners.HyperbandPruner()
    return optuna.pruners.NopPruner()


class ProgressMedianPruner(optuna.pruners.BasePruner):
    """Prunes a trial whose best value so far is worse than the median of the completed trials at the same progress.

    Trials report at their progress through the data (thousandths of an epoch). Trials of different batch sizes
    validate after different numbers of batches, so their reports rarely fall on the same progress; Optuna's
    MedianPruner compares only equal steps, and leaves such a trial without any to compare with. Here each
    completed trial counts with its latest value at or before the pruned trial's progress: what it had reached
    having seen no more data.
    """

    def __init__(self, n_startup_trials: int, n_warmup_steps: int) -> None:
        self.n_startup_trials, self.n_warmup_steps = n_startup_trials, n_warmup_steps

    @override
    def prune(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> bool:
        completed = study.get_trials(deepcopy=False, states=(STATE.COMPLETE,))
        progress = trial.last_step
        if not completed or len(completed) < self.n_startup_trials or progress is None:
            return False
        if progress < self.n_warmup_steps:
            return False
        values = [value for value in trial.intermediate_values.values() if not math.isnan(value)]
        if not values:
            return True
        maximize = study.direction == optuna.study.StudyDirection.MAXIMIZE
        best = max(values) if maximize else min(values)
        reached = [value for other in completed if (value := _value_at(other, progress)) is not None]
        if not reached:
            return False
        median = statistics.median(reached)
        return best < median if maximize else best > median


def _value_at(trial: optuna.trial.FrozenTrial, progress: int) -> float | None:
    """A trial's latest reported value at or before `progress`, or None if it reported none by then."""
    reported = [step for step in trial.intermediate_values if step <= progress]
    value = trial.intermediate_values[max(reported)] if reported else None
    return None if value is None or math.isnan(value) else value


class Driver:
    """Keeps `options.parallel` trials running until the study holds `options.trials` finished ones."""

    def __init__(
        self,
        options: SweepOptions,
        cli: Path,
        study: optuna.Study,
        space: dict,
        base_config: Path,
        sweep_dir: Path,
        logging: TrialLogging,
        placement=None,
    ):
        """
        Args:
            placement: where trials run and how they report; by default `trainrig.sweeps.local_trials.LocalPlacement`.
        """
        self.options, self.cli, self.study, self.space = options, cli, study, space
        self.base_config, self.sweep_dir, self.logging = base_config, sweep_dir, logging
        self.placement = placement or LocalPlacement()
        self.running: list[RunningTrial] = []
        self.stopping = False

    def run(self) -> None:
        previous = {signum: signal.signal(signum, self._stop) for signum in STOP_SIGNALS}
        try:
            interrupted = [
                self._adopt(frozen) for frozen in self.study.get_trials(deepcopy=False, states=(STATE.RUNNING,))
            ]
            while interrupted or self.running or (len(self.study.trials) < self.options.trials and not self.stopping):
                while not self.stopping and len(self.running) < self.options.parallel:
                    if interrupted:
                        self._start(interrupted.pop(0))
                    elif len(self.study.trials) < self.options.trials:
                        self._start(self._new())
                    else:
                        break
                if self.stopping and not self.running:
                    break
                time.sleep(POLL_S)
                for run in list(self.running):
                    self._poll(run)
        except BaseException:
            for run in self.running:  # as a dying driver's local trials get SIGTERM: also jobs on other machines
                self.placement.stop(run.process)
            raise
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        if self.stopping:
            say("stopped; trials in progress keep their checkpoints, and the same command continues the study")
            raise SystemExit(exit_status.STOPPED)  # as a trial's: stopped with checkpoints, the same command continues

    def _stop(self, signum, frame) -> None:
        self.stopping = True
        for run in self.running:
            self.placement.stop(run.process)

    def _new(self) -> RunningTrial:
        trial = self.study.ask(self.space)
        return self._prepared(trial, reported={})

    def _adopt(self, frozen: optuna.trial.FrozenTrial) -> RunningTrial:
        """A trial the previous driver left running: its process is stopping or gone, its checkpoint is kept."""
        # Optuna has no public way from a FrozenTrial to the live Trial that report() and tell() take.
        run = self._prepared(optuna.Trial(self.study, frozen._trial_id), frozen.intermediate_values)
        run.seconds = frozen.user_attrs.get(SECONDS, 0.0)
        self._read_reports(run)  # what it reported since the study last heard: a damaged channel stops here
        say(f"trial {frozen.number} was interrupted; it continues from its last checkpoint")
        return run

    def _prepared(self, trial: optuna.Trial, reported: dict) -> RunningTrial:
        directory = self.sweep_dir / f"trial_{trial.number}"
        trials.private_folder(directory)
        channel = self.placement.channel(f"sweep-{self.study.study_name}-trial-{trial.number}", directory)
        run = RunningTrial(trial, directory, channel, port=0)
        run.reported = set(reported)
        if reported:
            run.last_value = reported[max(reported)]
        return run

    def _start(self, run: RunningTrial) -> None:
        run.port = trials.free_port({other.port for other in self.running})
        run.placed = self.placement.take()
        run.process = self.placement.start(self.cli, self._arguments(run), run.directory, run.port)
        run.started_at = time.monotonic()
        self.running.append(run)
        say(f"trial {run.trial.number} started: {_shown(run.trial.params)} (log: {run.directory / trials.LOG})")

    def _arguments(self, run: RunningTrial) -> list[str]:
        channel = {"channel": str(run.channel.channel), "metric": self.options.metric}
        if self.placement.on_this_machine:
            channel["driver_pid"] = os.getpid()
        if run.channel.transport is not None:
            channel["transport"] = run.channel.transport
        reporter = {"class_path": "trainrig.sweeps.pruning.ReportToDriver", "init_args": channel}
        arguments = ["--config", str(self.base_config), *as_overrides(run.trial.params)]
        arguments += self.logging.arguments(self.sweep_dir, run.directory, self.study.study_name)
        arguments += ["--ckpt_path", "last"]
        arguments += ["--trainer.callbacks+", json.dumps(reporter), *run.placed]
        return arguments

    def _poll(self, run: RunningTrial) -> None:
        self._read_reports(run)
        if self.stopping:
            self.placement.stop(run.process)  # also a trial started while the stop signal arrived
        exit_code = run.process.poll()
        if exit_code is None:
            return
        if exit_code < 0:  # killed by a signal before it could handle one: report it as a shell does
            exit_code = 128 - exit_code
        self._read_reports(run)
        self.running.remove(run)
        self.placement.give_back(run.placed)
        run.seconds += time.monotonic() - run.started_at
        run.started_at = time.monotonic()
        run.trial.set_user_attr(SECONDS, run.seconds)
        number = run.trial.number
        cause = trials.failure_cause(run.directory, exit_code) if exit_code else ""
        if exit_code == exit_status.BAD_INPUT and METRIC_NOT_LOGGED in cause:
            self._fail(run, cause)
            self._stop(None, None)
            raise UserInputError(cause.removeprefix("exit 2: "))
        if exit_code == exit_status.DONE and run.pruned:
            self.study.tell(run.trial, state=STATE.PRUNED)
            say(f"trial {number} pruned after {max(run.reported) / PROGRESS_PER_EPOCH:g} epochs")
        elif exit_code == exit_status.DONE and run.last_value is not None:
            self.study.tell(run.trial, run.last_value)
            say(f"trial {number} finished: {self.options.metric} {run.last_value:.6g}")
        elif exit_code == exit_status.DONE:
            self._fail(run, f"it logged no {self.options.metric}; set --sweep.metric to a metric validation logs")
        elif self.stopping and exit_code in exit_status.RESTARTABLE:
            say(f"trial {number} stopped with a checkpoint")
        elif exit_code in exit_status.RESTARTABLE and run.restarts < self.options.max_restarts:
            run.restarts += 1
            say(f"trial {number} stopped ({cause}); restart {run.restarts}")
            self._start(run)
        else:
            self._fail(run, cause)

    def _read_reports(self, run: RunningTrial) -> None:
        for step, value in run.channel.new_reports():
            prune = False
            if step not in run.reported:
                run.trial.report(value, step)
                run.trial.set_user_attr(SECONDS, run.seconds + time.monotonic() - run.started_at)
                run.reported.add(step)
                prune = run.trial.should_prune()
            run.last_value = value
            run.pruned = run.channel.decide(step, prune) or run.pruned

    def _fail(self, run: RunningTrial, cause: str) -> None:
        run.trial.set_user_attr("fail_reason", cause)
        self.study.tell(run.trial, state=STATE.FAIL)
        say(f"trial {run.trial.number} failed: {cause}")


def say(message: str) -> None:
    print(f"sweep: {message}", file=sys.stderr, flush=True)


def _shown(params: dict) -> str:
    return ", ".join(f"{key.rsplit('.', 1)[-1]}={value}" for key, value in params.items())
