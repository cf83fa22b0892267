"""The fsdp2 tests' shared runs: the strategy's arguments, multi-process runs compared with DDP's and one
device's, and what a sharded checkpoint directory holds (see tests/test_fsdp2.py)."""

from pathlib import Path

from tests.helpers.runs import ROOT
from tests.helpers.strategy_runs import TOLERANCE, logged

FSDP2 = ("--trainer.strategy", "fsdp2", "--trainer.devices", "2")
DDP = ("--trainer.strategy", "ddp", "--trainer.devices", "2")
# The line the strategy prints once it has sharded the model: proof that fsdp2, not a fallback, ran.
SHARDED = "fsdp2: {units} sharding units over {processes} process(es)"

# Small enough for seconds on CPU: one global batch of 32 per epoch, so every world size sees the same samples per
# step, and SGD (Adam turns 1e-9 rounding differences of near-zero gradients into whole steps, tests/test_strategies).
MLP_SETTINGS = """
trainer:
  max_epochs: {epochs}
  log_every_n_steps: 1
  num_sanity_val_steps: 0
  enable_progress_bar: false
  enable_model_summary: false
  callbacks:
    - class_path: trainrig.resume.checkpoint.ResumableCheckpoint
      init_args: {{train_time_interval: null}}
model:
  init_args:
    hidden_sizes: [32]
    optimizer:
      class_path: torch.optim.SGD
      init_args: {{lr: 0.1, momentum: 0.9}}
data:
  init_args:
    root: {shapes_root}
    images_per_class: 8
    canvas_size: 32
    batch_size: {batch_size}
    num_workers: 0
"""


def write_mlp_settings(directory: Path, shapes_root: Path, epochs: int, batch_size: int) -> Path:
    path = directory / f"fsdp2_mlp_{epochs}x{batch_size}.yaml"
    path.write_text(MLP_SETTINGS.format(epochs=epochs, shapes_root=shapes_root, batch_size=batch_size))
    return path


def mlp_args(settings: Path, log_dir: Path, *extra: str) -> list[str]:
    return [
        *("--config", str(ROOT / "configs" / "mlp.yaml"), "--config", str(settings)),
        *("--trainer.logger.init_args.save_dir", str(log_dir)),
        *extra,
    ]


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
