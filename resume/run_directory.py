"""Where a run's files live, for every logger and launcher: `save_dir/<experiment>/<run>/` with the checkpoints,
`metrics.csv`, media and the resolved config; without a logger, the trainer's root directory.

One owner for these names, so that `--ckpt_path last`, the config writer, the media writers and the launchers that
copy a run directory agree on them.
"""

import re
from pathlib import Path

import yaml
from lightning.pytorch import Trainer

__all__ = [
    "CONFIG_FILE",
    "METRICS_FILE",
    "VERSION_DIR",
    "config_file_to_write",
    "next_version",
    "run_directory",
    "unused_config_name",
]

METRICS_FILE = "metrics.csv"
CONFIG_FILE = "config.yaml"
VERSION_DIR = re.compile(r"version_(\d+)")
# A resumed run's config beside the first one, when the command changed: config.resumed-1.yaml, ...
SAVED_CONFIG = re.compile(r"config(\.resumed-\d+)?\.yaml")
# Init arguments that name a logger's run; a resumed run is pointed at its run through them.
RUN_NAMING_ARGUMENTS = ("version", "id")


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
    """A config without what only says which checkpoint and which run folder the command continued."""
    config = yaml.safe_load(config_text) or {}
    config.pop("ckpt_path", None)
    loggers = (config.get("trainer") or {}).get("logger")
    for logger in loggers if isinstance(loggers, list) else [loggers]:
        if isinstance(logger, dict) and isinstance(logger.get("init_args"), dict):
            for argument in RUN_NAMING_ARGUMENTS:
                logger["init_args"].pop(argument, None)
    return config
