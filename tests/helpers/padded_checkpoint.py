"""A checkpoint of realistic size from a model of a few kilobytes: the tests that carry checkpoints between machines
prove it at the size of a real model's (an image classifier's with Adam's moments is over 100 MB) at the cost of a
small model."""

import functools
from pathlib import Path

import torch
from lightning.pytorch import Callback, LightningModule, Trainer
from typing_extensions import override

PADDING_KEY = "test_padding"
PADDING_BYTES = 100 * 2**20
# Incompressible and the same in every process, so a test can tell every byte arrived, and where.
PADDING_SEED = 20261128


@functools.cache  # drawn once a process (over a second): every rank calls it at every save
def padding() -> torch.Tensor:
    generator = torch.Generator().manual_seed(PADDING_SEED)
    return torch.randint(0, 256, (PADDING_BYTES,), dtype=torch.uint8, generator=generator)


class PaddedCheckpoint(Callback):
    """Adds 100 MB of random bytes to every checkpoint the run writes; loading ignores them."""

    @override
    def on_save_checkpoint(self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict) -> None:
        checkpoint[PADDING_KEY] = padding()


# Appends the padding to a run's callbacks, on its command line.
PADDED_CHECKPOINTS = f"--trainer.callbacks+={PaddedCheckpoint.__module__}.{PaddedCheckpoint.__qualname__}"


def assert_padded(checkpoint: Path) -> None:
    """`checkpoint` holds every byte of the padding, where PaddedCheckpoint put it."""
    assert torch.equal(torch.load(checkpoint, weights_only=True)[PADDING_KEY], padding()), checkpoint


def assert_every_checkpoint_padded(directory: Path) -> None:
    """Each checkpoint under `directory`, and there is one, holds the whole padding."""
    checkpoints = sorted(directory.rglob("*.ckpt"))
    assert checkpoints, f"no checkpoint under {directory}"
    for checkpoint in checkpoints:
        assert_padded(checkpoint)
