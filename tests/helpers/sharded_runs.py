"""The fsdp2 tests' shared runs: the strategy's arguments, multi-process runs compared with DDP's and one
device's, and what a sharded checkpoint directory holds (see tests/test_fsdp2.py)."""

from pathlib import Path

from tests.helpers.mlp.tiny_mlp import SGD, mlp_args, write_settings
from tests.helpers.strategy_runs import TOLERANCE, logged

__all__ = [
    "DDP",
    "FSDP2",
    "SHARDED",
    "assert_same_losses",
    "mlp_args",
    "shard_files",
    "sharded_checkpoint",
    "write_mlp_settings",
]

FSDP2 = ("--trainer.strategy", "fsdp2", "--trainer.devices", "2")
DDP = ("--trainer.strategy", "ddp", "--trainer.devices", "2")
# The line the strategy prints once it has sharded the model: proof that fsdp2, not a fallback, ran.
SHARDED = "fsdp2: {units} sharding units over {processes} process(es)"

# The template's checkpoint callback, on no timer: it writes the sharded `last.ckpt` directories the tests read.
RESUMABLE = {"class_path": "trainrig.resume.checkpoint.ResumableCheckpoint", "init_args": {"train_time_interval": None}}


def write_mlp_settings(directory: Path, shapes_root: Path, epochs: int, batch_size: int) -> Path:
    """The tests' tiny MLP (tests/helpers/tiny_mlp.py) with SGD and resumable checkpoints."""
    return write_settings(
        directory / f"fsdp2_mlp_{epochs}x{batch_size}.yaml",
        shapes_root,
        epochs=epochs,
        batch_size=batch_size,
        model={"hidden_sizes": [32], "optimizer": SGD},
        callbacks=[RESUMABLE],
    )


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
