"""Shrunken real runs: the example configs with few batches, small generated images and tmp dirs."""

import csv
import math
import re
from pathlib import Path

import cli
from tests.helpers import ROOT
from tests.helpers.examples import CONFIGS, logged, shrink_args

__all__ = ["EXAMPLE_CONFIGS", "LAUNCHER_VARIABLES", "ROOT", "last_value", "read_metrics", "run_cli", "small_run_args"]

# One config per example, for the tests that hold for every example.
EXAMPLE_CONFIGS = CONFIGS
# What a launcher sets in the process that launches ranks (torchrun's TORCHELASTIC_*, the training operator's PET_*).
# A test that runs one in this process must not leave it to later tests, and a parent launcher must not leak it into
# the processes a test starts: they would take themselves for ranks started by someone else and wait forever.
LAUNCHER_VARIABLES = re.compile(
    r"(RANK|LOCAL_RANK|NODE_RANK|GROUP_RANK|WORLD_SIZE|LOCAL_WORLD_SIZE|MASTER_ADDR|MASTER_PORT|TORCHELASTIC_.*|PET_.*)"
)


def small_run_args(config: str, log_dir: Path, shapes_root: Path | None = None, *extra: str) -> list[str]:
    """Arguments that shrink an example config to a seconds-long CPU run writing under `log_dir`."""
    args = [
        "--config",
        str(ROOT / "configs" / config),
        "--trainer.max_epochs",
        "1",
        "--trainer.limit_train_batches",
        "3",
        "--trainer.limit_val_batches",
        "2",
        "--trainer.log_every_n_steps",
        "1",
        "--trainer.enable_progress_bar",
        "false",
        "--trainer.enable_model_summary",
        "false",
        "--trainer.logger.init_args.save_dir",
        str(log_dir),
    ]
    return args + shrink_args(config, shapes_root) + list(extra)


def run_cli(subcommand: str, args: list[str]) -> None:
    cli.main([subcommand, *args])


def read_metrics(log_dir: Path) -> list[dict[str, str]]:
    (metrics_file,) = log_dir.rglob("metrics.csv")
    with metrics_file.open() as handle:
        return list(csv.DictReader(handle))


def assert_fit_left_checkpoints_and_metrics(log_dir: Path, config: str) -> list[dict[str, str]]:
    """The one run under `log_dir` saved `last.ckpt` and a best checkpoint, and every metric its example logs ended
    finite; its metrics rows."""
    (run_dir,) = [path.parent for path in log_dir.rglob("config.yaml")]
    checkpoints = sorted(path.name for path in (run_dir / "checkpoints").iterdir())
    assert "last.ckpt" in checkpoints and any(name.startswith("best-") for name in checkpoints)
    rows = read_metrics(log_dir)
    for key in logged(config):
        assert math.isfinite(last_value(rows, key)), f"{key} is not finite"
    return rows


def last_value(rows: list[dict[str, str]], key: str) -> float:
    values = [float(row[key]) for row in rows if row.get(key) not in (None, "")]
    assert values, f"{key} was never logged"
    return values[-1]
