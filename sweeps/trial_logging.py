"""Where each trial logs: its own folder `sweep_<study>/trial_<n>/` under any logger the sweep supports, and under
W&B one run per trial in a group named after the study.

`--ckpt_path last` finds a trial's checkpoints in its logger's experiment folder (resume/latest.py), so each trial
needs an experiment folder of its own: CSV and TensorBoard name it `save_dir/name`, W&B `save_dir/project`.
"""

from dataclasses import dataclass
from pathlib import Path

from errors import UserInputError

LOGGER_OPTION = "--trainer.logger.init_args"


@dataclass(frozen=True)
class TrialLogging:
    """The sweep's folder and how a trial's logger options put the trial in its own sub-folder of it."""

    logger_class: str
    save_dir: str
    default_name: str

    def sweep_dir(self, study_name: str) -> Path:
        return (Path(self.save_dir) / f"sweep_{study_name}").resolve()

    def arguments(self, sweep_dir: Path, trial_dir: Path, study_name: str) -> list[str]:
        if self.logger_class == "WandbLogger":
            # save_dir/project/<run id>/checkpoints: the trial's own save_dir keeps its runs apart from the others'.
            return [
                *(f"{LOGGER_OPTION}.save_dir", str(trial_dir)),
                *(f"{LOGGER_OPTION}.name", trial_dir.name),
                *(f"{LOGGER_OPTION}.group", study_name),
            ]
        return [f"{LOGGER_OPTION}.save_dir", str(sweep_dir), f"{LOGGER_OPTION}.name", trial_dir.name]


# Loggers whose runs live in a folder `--ckpt_path last` searches; the init argument naming the sweep by default.
SUPPORTED = {"CSVLogger": "name", "ContinuingCSVLogger": "name", "TensorBoardLogger": "name", "WandbLogger": "project"}


def trial_logging(base: dict) -> TrialLogging:
    """How the trials of a sweep over the resolved config `base` log, or a one-line error for another logger."""
    logger = base.get("trainer", {}).get("logger")
    class_name = logger.get("class_path", "").rsplit(".", 1)[-1] if isinstance(logger, dict) else ""
    if class_name not in SUPPORTED:
        raise UserInputError(
            f"a sweep needs trainer.logger to be one of {', '.join(SUPPORTED)} (each trial logs and "
            f"checkpoints in its own folder of it), not {class_name or logger}"
        )
    init_args = logger.get("init_args", {})
    return TrialLogging(
        class_name, init_args.get("save_dir") or "logs", init_args.get(SUPPORTED[class_name]) or "lightning_logs"
    )
