"""`--ckpt_path last`: the newest checkpoint that loads, among every run of the same experiment.

Lightning looks for `last` only in the new run's own, empty version directory. Here the experiment is the first
logger's `save_dir`/`name` (or an explicit checkpoint `dirpath`, or `default_root_dir` without a logger); every
version directory in it is searched, and the resumed run is pointed at that version, so its logs continue there.
"""

import logging
import sys
from dataclasses import dataclass
from pathlib import Path

from lightning.pytorch.utilities.rank_zero import rank_zero_only

from trainrig.errors import UserInputError, one_line
from trainrig.resume.checkpoint import LAST_NAME, METRICS_ROWS_KEY, PREVIOUS_NAME
from trainrig.resume.csv_logger import drop_rows_from_step
from trainrig.resume.readable import read_checkpoint_file, sharded_checkpoint_without_tensors
from trainrig.resume.run_directory import (
    METRICS_FILE,
    RUN_FOLDERS,
    VERSION_DIR,
    experiment_name,
    first_logger,
    logger_class,
)
from trainrig.resume.sharded import is_sharded_checkpoint, saved_shapes

log = logging.getLogger(__name__)

PREFERRED = (LAST_NAME, PREVIOUS_NAME)
# `--ckpt_path` values Lightning resolves itself rather than opening a file of that name.
CHECKPOINT_KEYWORDS = ("last", "best", "hpc", "registry")


@dataclass(frozen=True)
class ResumePoint:
    checkpoint: Path
    run_dir: Path | None  # the version directory the run continues in; None when checkpoints sit in a fixed dirpath
    global_step: int
    logged_steps: int  # the step number the resumed run logs its first metrics at
    metrics_rows: int | None = None  # the rows logged before it, for a run that ended at max_steps mid-epoch


def names_a_file(ckpt_path: str | None) -> bool:
    """Whether `--ckpt_path` names a file, rather than a keyword Lightning resolves, a registry model or a URL."""
    return not (
        ckpt_path is None or ckpt_path in CHECKPOINT_KEYWORDS or ckpt_path.startswith("registry:") or "://" in ckpt_path
    )


def check_checkpoint_exists(ckpt_path: str | None) -> None:
    """A checkpoint path naming nothing fails before any data is prepared, not in Lightning's traceback after."""
    if names_a_file(ckpt_path) and not Path(ckpt_path).exists():
        raise UserInputError(f"checkpoint {ckpt_path} does not exist; set --ckpt_path to a saved .ckpt file")


def say(message: str) -> None:
    if rank_zero_only.rank == 0:
        print(f"resume: {message}", file=sys.stderr, flush=True)


def checkpoint_candidates(directory: Path) -> list[Path]:
    """Checkpoints in one directory, the ones to try first first: last, previous, then the newest."""
    found = [
        path
        for path in directory.glob("*.ckpt")
        if (path.is_file() or is_sharded_checkpoint(path)) and not path.name.startswith(".")
    ]
    return sorted(
        found,
        key=lambda path: (
            path.name not in PREFERRED,
            PREFERRED.index(path.name) if path.name in PREFERRED else 0,
            -path.stat().st_mtime,
        ),
    )


def loadable(path: Path, weights_only: bool = True) -> tuple[dict | None, str]:
    """The checkpoint's progress counters, or None and why it cannot be resumed from. A checkpoint that names code
    to run is not skipped for an older one but refused (a UserInputError), unless `weights_only` is False."""
    try:
        if path.is_dir():  # sharded: the tensors stay unread; the shards' index says they were all written
            checkpoint = sharded_checkpoint_without_tensors(path, weights_only)
        else:
            checkpoint = read_checkpoint_file(path, weights_only)
    except UserInputError:
        raise
    except Exception as error:  # noqa: BLE001 - any failure to read it makes it unusable, whatever the cause
        return None, one_line(error)
    if not isinstance(checkpoint, dict) or "state_dict" not in checkpoint or "loops" not in checkpoint:
        return None, "not a Lightning training checkpoint"
    fit_loop = checkpoint["loops"].get("fit_loop", {})
    batches_that_stepped = fit_loop.get("epoch_loop.state_dict", {}).get("_batches_that_stepped", 0)
    epochs = fit_loop.get("epoch_progress", {}).get("current", {})
    # Saved at an epoch's end (between its `processed` and `completed`), the counter already counts the epoch's last
    # step; saved after a batch, Lightning counts the step it resumes at once more (training_epoch_loop.reset).
    at_epoch_end = epochs.get("processed", 0) > epochs.get("completed", 0)
    return {
        "global_step": checkpoint.get("global_step", 0),
        "first_logged_step": batches_that_stepped + (0 if at_epoch_end else 1),
        "metrics_rows": checkpoint.get(METRICS_ROWS_KEY),
    }, ""


def first_usable(candidates: list[Path], weights_only: bool = True) -> tuple[Path, dict] | None:
    """Try each candidate; say in one line when a damaged one is skipped; error when none works."""
    failures = []
    for path in candidates:
        progress, reason = loadable(path, weights_only)
        if progress is not None:
            if failures:
                say(f"{failures[-1][0]} cannot be read ({failures[-1][1]}); falling back to {path}")
            return path, progress
        failures.append((path, reason))
    if failures:
        reasons = "; ".join(f"{path.name}: {reason}" for path, reason in failures)
        raise UserInputError(
            f"no checkpoint in {failures[0][0].parent} can be resumed from ({reasons}); remove them to start fresh"
        )
    return None


def _checkpoint_dirpath(trainer_config) -> str | None:
    for callback in trainer_config.get("callbacks") or []:
        init_args = getattr(callback, "init_args", None)
        if (
            callback.get("class_path", "").endswith("ResumableCheckpoint")
            and init_args is not None
            and init_args.get("dirpath")
        ):
            return init_args.dirpath
    return None


def find_resume_point(
    trainer_config, checkpoint_root: str | None = None, weights_only: bool = True
) -> ResumePoint | None:
    """The newest usable checkpoint of the experiment the trainer config writes to, or None if it has none yet.

    `checkpoint_root`: a folder holding the runs' checkpoints in the same `<experiment>/<run>/checkpoints` layout
    (a launcher's shared checkpoint directory), while logs stay in the logger's folders.
    """
    if dirpath := _checkpoint_dirpath(trainer_config):
        return _in_directory(Path(dirpath), None, weights_only)
    logger = first_logger(trainer_config)
    if not logger:
        return _in_directory(Path(trainer_config.get("default_root_dir") or ".") / "checkpoints", None, weights_only)
    _run_folders(logger)  # a logger without experiment folders cannot be searched
    name = experiment_name(logger)
    experiment = Path(logger.init_args.get("save_dir") or ".") / name
    checkpoints = Path(checkpoint_root) / name if checkpoint_root is not None else experiment
    runs = [path for path in checkpoints.iterdir() if path.is_dir()] if checkpoints.is_dir() else []
    # The run whose newest checkpoint is newest; damaged files fall back within that run, then to older runs.
    runs.sort(key=_newest_checkpoint_time, reverse=True)
    for run in runs:
        point = _in_directory(run / "checkpoints", experiment / run.name, weights_only)
        if point is not None:
            return point
    return None


def _run_folders(logger) -> tuple[str, str | None, str]:
    class_name = logger_class(logger)
    if class_name not in RUN_FOLDERS:
        raise UserInputError(
            f"--ckpt_path last finds runs of {', '.join(RUN_FOLDERS)}, not of {class_name or logger}; "
            "pass a checkpoint path"
        )
    return RUN_FOLDERS[class_name]


def _continue_run(logger, run_dir: Path) -> None:
    """Point the logger at the run folder being resumed."""
    *_, argument = _run_folders(logger)
    version = VERSION_DIR.fullmatch(run_dir.name)
    logger.init_args[argument] = int(version.group(1)) if version and argument == "version" else run_dir.name


def _newest_checkpoint_time(run_dir: Path) -> float:
    return (
        max((path.stat().st_mtime for path in checkpoint_candidates(run_dir / "checkpoints")), default=0.0)
        if (run_dir / "checkpoints").is_dir()
        else 0.0
    )


def _in_directory(directory: Path, run_dir: Path | None, weights_only: bool) -> ResumePoint | None:
    if not directory.is_dir():
        return None
    found = first_usable(checkpoint_candidates(directory), weights_only)
    if found is None:
        return None
    path, progress = found
    return ResumePoint(path, run_dir, progress["global_step"], progress["first_logged_step"], progress["metrics_rows"])


def resolve_last(config, checkpoint_root: str | None = None) -> ResumePoint | None:
    """Replace `ckpt_path: last` in a parsed fit config by the checkpoint to resume and point the logger at its run.

    Returns the resume point, for `continue_metrics` once the run is accepted: a refused resume leaves the run's
    files as they were."""
    if config.get("ckpt_path") != "last":
        return None
    point = find_resume_point(config.trainer, checkpoint_root, config.weights_only)
    if point is None:
        say("no checkpoint of this experiment yet; starting fresh")
        config.ckpt_path = None
        return None
    config.ckpt_path = str(point.checkpoint)
    if point.run_dir is not None:
        _continue_run(first_logger(config.trainer), point.run_dir)
    say(f"continuing from {point.checkpoint} (step {point.global_step})")
    return point


def continue_metrics(point: ResumePoint | None) -> None:
    """Drop the resumed run's metrics rows logged after its checkpoint, which the run logs again."""
    if point is not None and point.run_dir is not None and rank_zero_only.rank == 0:
        drop_rows_from_step(point.run_dir / METRICS_FILE, point.logged_steps, point.metrics_rows)


def check_fits(model, ckpt_path, weights_only: bool = True) -> None:
    """A UserInputError naming the first parameter whose shape differs, instead of torch's page of mismatches."""
    if ckpt_path is None:
        return
    if is_sharded_checkpoint(ckpt_path):
        saved = saved_shapes(Path(ckpt_path), weights_only)
    elif Path(ckpt_path).is_file():
        saved = read_checkpoint_file(ckpt_path, weights_only).get("state_dict", {})
    else:
        return
    for name, tensor in model.state_dict().items():
        if name in saved and hasattr(saved[name], "shape") and saved[name].shape != tensor.shape:
            raise UserInputError(
                f"checkpoint {ckpt_path} does not fit this model: {name} is {list(saved[name].shape)} there and "
                f"{list(tensor.shape)} here; resume with the config the checkpoint was trained with, or start fresh"
            )
