"""Where each trial logs: its own folder `sweep_<study>/trial_<n>/` under any logger `--ckpt_path last` supports, and
for a logger that groups runs (one with a `group` argument) one run per trial in a group named after the study.

`--ckpt_path last` finds a trial's checkpoints in its logger's experiment folder `save_dir/<experiment>`
(resume/run_directory.py RUN_FOLDERS), so each trial needs an experiment folder of its own: a logger whose experiment
is its `name` gets the trial's name; one whose experiment is named otherwise (a project) gets the trial's folder as
save_dir.
"""

import os
from dataclasses import dataclass
from pathlib import Path

from errors import UserInputError
from resume.run_directory import RUN_FOLDERS

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
    logger = base.get("trainer", {}).get("logger")
    class_name = logger.get("class_path", "").rsplit(".", 1)[-1] if isinstance(logger, dict) else ""
    if class_name not in RUN_FOLDERS:
        raise UserInputError(
            f"a sweep needs trainer.logger to be one of {', '.join(RUN_FOLDERS)} (each trial logs and "
            f"checkpoints in its own folder of it), not {class_name or logger}"
        )
    experiment_argument, environment_variable, _ = RUN_FOLDERS[class_name]
    init_args = logger.get("init_args", {})
    default_name = init_args.get(experiment_argument) or os.environ.get(environment_variable or "", "lightning_logs")
    return TrialLogging(init_args.get("save_dir") or "logs", default_name, experiment_argument, "group" in init_args)
