"""The command line of a launcher: its own options before `--`, and after it the `cli.py fit` arguments every process
of the job gets, from which the strategy is taken out (the launcher places it) and where the flags the launcher sets
itself are refused: the trainer flags derived from the job's shape, and the resume flag. Once the launcher has sized the
job, the strategy's own check of that size runs (`check_job_fits`)."""

from dataclasses import dataclass

from trainrig.errors import UserInputError
from trainrig.launch.strategy import JobStrategy, take_strategy
from trainrig.launch.timeouts import check_timeouts
from trainrig.launch.trainer_flags import DERIVED_TRAINER_FLAGS
from trainrig.registry import import_object
from trainrig.strategies.strategy_option import strategy_class

__all__ = ["RESUME", "SEPARATOR", "Launcher", "check_job_fits", "job_arguments", "split_at_separator"]

SEPARATOR = "--"
# What a restarted or requeued job runs with, so that it continues its run from the newest checkpoint.
RESUME = ("--ckpt_path", "last")


@dataclass(frozen=True)
class Launcher:
    """How a launcher's refusals name its job and its own options."""

    runs_in: str  # where the processes run, e.g. "in the pods"
    node: str  # what the launcher calls one machine of the job, e.g. "node"
    sized_by: str  # its options the derived trainer flags come from
    resized_by: str  # its options that change the number of processes
    resumes: str  # when it adds the resume flag, and why


def split_at_separator(argv: list[str]) -> tuple[list[str], tuple[str, ...]]:
    """The launcher's own options, and the `cli.py fit` arguments after the first `--`."""
    split = argv.index(SEPARATOR) if SEPARATOR in argv else len(argv)
    return argv[:split], tuple(argv[split + 1 :])


def job_arguments(overrides: tuple[str, ...], launcher: Launcher) -> tuple[JobStrategy, tuple[str, ...]]:
    """The strategy the arguments after `--` choose, and the arguments without it, checked: timeouts the trainer
    reads, and none of the flags the launcher sets itself."""
    strategy, overrides = take_strategy(overrides, launcher.runs_in)
    check_timeouts(overrides)
    for override in overrides:
        flag = override.split("=", 1)[0].rstrip("+")
        if flag in DERIVED_TRAINER_FLAGS:
            raise UserInputError(f"{flag} is set from {launcher.sized_by}; do not override it after `{SEPARATOR}`")
        if flag == RESUME[0]:
            raise UserInputError(
                f"{flag} is set to `{RESUME[1]}` {launcher.resumes}; do not override it after `{SEPARATOR}`"
            )
    return strategy, overrides


def check_job_fits(
    strategy: JobStrategy,
    overrides: tuple[str, ...],
    config: str,
    hosts: int,
    processes_per_host: int,
    launcher: Launcher,
) -> None:
    """A UserInputError when the strategy's own check of a launched job refuses its `hosts` x `processes_per_host`
    processes with these overrides and config: refused when the job is written, not after it waited in a queue.

    A strategy class declares that check in its `job_check` attribute, by import path (the pipeline's: its stages fit
    the processes), called as `check(overrides, config, hosts, processes_per_host, launcher)`. It is resolved only
    for a job that runs the strategy: the check reads a launcher's arguments, so it lives in trainrig/launch, which
    strategies may not import, in a file that comes and goes with the strategy's, and no launcher names it."""
    check = getattr(strategy_class(strategy.name), "job_check", None)
    if check is not None:
        import_object(check)(overrides, config, hosts, processes_per_host, launcher)
