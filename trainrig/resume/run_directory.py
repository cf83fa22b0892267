"""Where a run's files live, for every logger and launcher: `save_dir/<experiment>/<run>/` with the checkpoints,
`metrics.csv`, media and the resolved config; without a logger, the trainer's root directory.

One owner for these names, so that `--ckpt_path last`, the config writer, the media writers and the launchers that
copy a run directory agree on them.
"""

import os
import re
from pathlib import Path

import yaml
from lightning.pytorch import Trainer

from trainrig.registry import run_folders

__all__ = [
    "CONFIG_FILE",
    "METRICS_FILE",
    "RUN_FOLDERS",
    "VERSION_DIR",
    "config_file_to_write",
    "experiment_name",
    "first_logger",
    "logger_class",
    "next_version",
    "output_root",
    "run_directory",
    "run_folder",
    "unused_config_name",
]

METRICS_FILE = "metrics.csv"
CONFIG_FILE = "config.yaml"
VERSION_DIR = re.compile(r"version_(\d+)")
# A resumed run's config beside the first one, when the command changed: config.resumed-1.yaml, ...
SAVED_CONFIG = re.compile(r"config(\.resumed-\d+)?\.yaml")
# Init arguments that name a logger's run; a resumed run is pointed at its run through them.
RUN_NAMING_ARGUMENTS = ("version", "id")
# Loggers whose runs live in save_dir/<experiment>/<run>, as Lightning's ModelCheckpoint places them: the init
# argument naming the experiment (its fallback environment variable), and the one naming the run, which a resumed
# run is given so that the logger continues that run.
RUN_FOLDERS = {
    "CSVLogger": ("name", None, "version"),
    "ContinuingCSVLogger": ("name", None, "version"),
    "TensorBoardLogger": ("name", None, "version"),
    **run_folders(),
}


# The trainer config's logger section, as jsonargparse parses it or as plain data (a launcher's resolved config):
# these read both.
def first_logger(trainer_config):
    """The first configured logger ({class_path, init_args}), or None."""
    logger = trainer_config.get("logger")
    if isinstance(logger, list):
        logger = logger[0] if logger else None
    return logger if logger and not isinstance(logger, bool) else None


def logger_class(logger) -> str:
    return (logger.get("class_path") or "").rsplit(".", 1)[-1]


def experiment_name(logger) -> str:
    """The folder between save_dir and the run folders."""
    argument, environment_variable, _ = RUN_FOLDERS.get(logger_class(logger), ("name", None, "version"))
    fallback = os.environ.get(environment_variable, "lightning_logs") if environment_variable else "lightning_logs"
    return (logger.get("init_args") or {}).get(argument) or fallback


def output_root(trainer_config) -> Path:
    """Where the run's files go on this machine: the first logger's save_dir, else the trainer's root directory."""
    loggers = trainer_config.get("logger")
    for logger in loggers if isinstance(loggers, list) else [loggers]:
        if logger and not isinstance(logger, bool) and (logger.get("init_args") or {}).get("save_dir"):
            return Path(logger["init_args"]["save_dir"])
    return Path(trainer_config.get("default_root_dir") or ".")


def run_folder(trainer_config) -> Path:
    """The run's folder relative to output_root (`<experiment>/<run>`), once its run is named."""
    logger = first_logger(trainer_config)
    if logger is None:
        return Path()
    *_, run_argument = RUN_FOLDERS.get(logger_class(logger), ("name", None, "version"))
    run = (logger.get("init_args") or {}).get(run_argument)
    return Path(experiment_name(logger)) / (f"version_{run}" if run_argument == "version" else str(run))


def run_directory(trainer: Trainer) -> Path:
    """The run's folder as Lightning's ModelCheckpoint places checkpoints in it; not a collective, unlike
    `trainer.log_dir`, which for some loggers is their shared `save_dir` rather than the run's folder."""
    if not trainer.loggers:
        return Path(trainer.default_root_dir)
    logger = trainer.loggers[0]
    version = logger.version
    run = version if isinstance(version, str) else f"version_{version}"
    return Path(logger.save_dir or trainer.default_root_dir) / str(logger.name) / run


def next_version(experiment: Path) -> int:
    """The number of a new `version_N` folder in an experiment folder."""
    versions = [
        int(match.group(1)) for path in experiment.glob("version_*") if (match := VERSION_DIR.fullmatch(path.name))
    ]
    return max(versions, default=-1) + 1


def unused_config_name(run_dir: Path, filename: str = CONFIG_FILE) -> str:
    """`config.yaml`, or `config.resumed-K.yaml` for the K-th resumption of the same run with another command."""
    path = Path(filename)
    resumption = 0
    while (run_dir / filename).exists():
        resumption += 1
        filename = f"{path.stem}.resumed-{resumption}{path.suffix}"
    return filename


def config_file_to_write(run_dir: Path, config_text: str, filename: str = CONFIG_FILE) -> str | None:
    """The name to save a run's resolved config under, or None when the run directory already holds that config
    (a run resumed with the command it started with, which leaves the run directory an uninterrupted run leaves)."""
    wanted = _comparable(config_text)
    for path in sorted(run_dir.glob("config*.yaml")):
        if SAVED_CONFIG.fullmatch(path.name) and _comparable(path.read_text()) == wanted:
            return None
    return unused_config_name(run_dir, filename)


def _comparable(config_text: str):
    """A config without what only says which checkpoint (and whether it was trusted) and which run folder the command
    continued."""
    config = yaml.safe_load(config_text) or {}
    config.pop("ckpt_path", None)
    config.pop("weights_only", None)
    loggers = (config.get("trainer") or {}).get("logger")
    for logger in loggers if isinstance(loggers, list) else [loggers]:
        if isinstance(logger, dict) and isinstance(logger.get("init_args"), dict):
            for argument in RUN_NAMING_ARGUMENTS:
                logger["init_args"].pop(argument, None)
    return config
