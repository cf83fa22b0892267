"""The fsdp2 tests' shared runs: the strategy's arguments, multi-process runs compared with DDP's and one
device's, an example's refusals and runs under fsdp2, and what a sharded checkpoint directory holds."""

from pathlib import Path

import pytest

from tests.helpers.runs import run_cli, small_run_args
from tests.helpers.strategy_runs import TOLERANCE, logged, run_ok

__all__ = [
    "DDP",
    "FSDP2",
    "SHARDED",
    "assert_fsdp2_refuses",
    "assert_fsdp2_trains_as_ddp",
    "assert_same_losses",
    "shard_files",
    "sharded_checkpoint",
]

FSDP2 = ("--trainer.strategy", "fsdp2", "--trainer.devices", "2")
DDP = ("--trainer.strategy", "ddp", "--trainer.devices", "2")
# The line the strategy prints once it has sharded the model: proof that fsdp2, not a fallback, ran.
SHARDED = "fsdp2: {units} sharding units over {processes} process(es)"


def sharded_checkpoint(log_dir: Path, name: str = "last.ckpt") -> Path:
    """The run's checkpoint of that name, asserted to be a directory of one shard file per process."""
    (path,) = log_dir.rglob(name)
    assert path.is_dir(), f"{path} is not a sharded checkpoint directory"
    return path


def shard_files(checkpoint: Path) -> list[str]:
    return sorted(path.name for path in checkpoint.iterdir())


def assert_same_losses(mine: Path, theirs: Path, key: str = "train/loss", tolerance: float = TOLERANCE) -> None:
    first, second = logged(mine, key), logged(theirs, key)
    assert len(first) == len(second) and first, f"{key}: {first} vs {second}"
    worst = max(abs(a - b) for a, b in zip(first, second))
    assert worst <= tolerance, f"{key} differs by {worst}: {first} vs {second}"


def assert_fsdp2_refuses(capsys, tmp_path: Path, shapes_root: Path, config: str, extra: tuple, message: str) -> None:
    """A one-process fsdp2 run of the example's `config` with `extra` stops with one line naming `message`, exit 2,
    and writes nothing."""
    logs = tmp_path / "logs"
    args = small_run_args(config, logs, shapes_root, "--trainer.strategy", "fsdp2", "--trainer.accelerator", "cpu")
    with pytest.raises(SystemExit) as exit_info:
        run_cli("fit", [*args, "--trainer.devices", "1", *extra])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("error: ") and message in error, error
    assert not logs.exists(), "nothing written"


def assert_fsdp2_trains_as_ddp(tmp_path: Path, shapes_root: Path, config: str) -> None:
    """The example sharded by its own units on two processes; losses as DDP's, within 1e-4: the examples train with
    Adam, whose first steps divide a gradient by its own magnitude, a looser bound than the strategy tests' SGD."""
    output = run_ok("fit", small_run_args(config, tmp_path / "fsdp2", shapes_root, *FSDP2))
    assert "fsdp2: " in output and "sharding units over 2 process(es)" in output, output[-3000:]
    run_ok("fit", small_run_args(config, tmp_path / "ddp", shapes_root, *DDP))
    assert_same_losses(tmp_path / "fsdp2", tmp_path / "ddp", tolerance=1e-4)
    sharded_checkpoint(tmp_path / "fsdp2")
