"""Where each trial logs: its own folder `sweep_<study>/trial_<n>/` under any logger `--ckpt_path last` supports, and
for a logger that groups runs (one with a `group` argument) one run per trial in a group named after the study.

`--ckpt_path last` finds a trial's checkpoints in its logger's experiment folder `save_dir/<experiment>`
(trainrig/resume/run_directory.py RUN_FOLDERS), so each trial needs an experiment folder of its own: a logger whose
experiment is its `name` gets the trial's name; one whose experiment is named otherwise (a project) gets the trial's
folder as save_dir.
"""

from dataclasses import dataclass
from pathlib import Path

from trainrig.errors import UserInputError
from trainrig.resume.run_directory import RUN_FOLDERS, experiment_name, first_logger, logger_class

LOGGER_OPTION = "--trainer.logger.init_args"


@dataclass(frozen=True)
class TrialLogging:
    """The sweep's folder and how a trial's logger options put the trial in its own sub-folder of it."""

    save_dir: str
    default_name: str
    experiment_argument: str
    groups_runs: bool

    def sweep_dir(self, study_name: str) -> Path:
        return (Path(self.save_dir) / f"sweep_{study_name}").resolve()

    def arguments(self, sweep_dir: Path, trial_dir: Path, study_name: str) -> list[str]:
        save_dir = sweep_dir if self.experiment_argument == "name" else trial_dir
        arguments = [f"{LOGGER_OPTION}.save_dir", str(save_dir), f"{LOGGER_OPTION}.name", trial_dir.name]
        if self.groups_runs:
            arguments += [f"{LOGGER_OPTION}.group", study_name]
        return arguments


def trial_logging(base: dict) -> TrialLogging:
    """How the trials of a sweep over the resolved config `base` log, or a one-line error for another logger."""
    configured = base.get("trainer", {}).get("logger")
    logger = first_logger(base.get("trainer", {}))
    class_name = logger_class(logger) if isinstance(logger, dict) else ""
    if class_name not in RUN_FOLDERS:
        raise UserInputError(
            f"a sweep needs trainer.logger to be one of {', '.join(RUN_FOLDERS)} (each trial logs and "
            f"checkpoints in its own folder of it), not {class_name or configured}"
        )
    experiment_argument, _, _ = RUN_FOLDERS[class_name]
    init_args = logger.get("init_args") or {}
    return TrialLogging(
        init_args.get("save_dir") or "logs", experiment_name(logger), experiment_argument, "group" in init_args
    )
