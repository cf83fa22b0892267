"""Every rank's random number generators in the checkpoint, so dropout and sampling continue as if never stopped."""

import io
import random

import numpy as np
import torch
import torch.distributed as dist
from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.utilities import rank_zero_warn
from typing_extensions import override

CHECKPOINT_KEY = "random_states"


def current_states() -> dict:
    """Tensors and plain Python values only, so that Lightning's `weights_only` checkpoint loading accepts them."""
    kind, keys, position, has_gauss, cached_gaussian = np.random.get_state()
    numpy_state = (kind, torch.from_numpy(keys.copy()), int(position), int(has_gauss), float(cached_gaussian))
    states = {"torch": torch.get_rng_state(), "numpy": numpy_state, "python": random.getstate()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def restore_states(states: dict) -> None:
    torch.set_rng_state(states["torch"])
    kind, keys, position, has_gauss, cached_gaussian = states["numpy"]
    np.random.set_state((kind, keys.numpy(), position, has_gauss, cached_gaussian))
    random.setstate(states["python"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


def _serialized(states: dict) -> bytes:
    buffer = io.BytesIO()
    torch.save(states, buffer)
    return buffer.getvalue()


def gathered_from_every_rank(trainer: Trainer, local: dict) -> list[dict]:
    """Every rank's `local` (tensors and plain values), in rank order, on every rank: rank 0 writes the checkpoint."""
    if trainer.world_size == 1 or not (dist.is_available() and dist.is_initialized()):
        return [local]
    # As bytes: all_gather_object cannot unpickle tensors it pickled itself (torch 2.14).
    gathered: list[bytes | None] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, _serialized(local))
    return [torch.load(io.BytesIO(states), weights_only=True) for states in gathered]


class RandomState(Callback):
    """Saves torch, CUDA, numpy and Python random states of every rank; restores them just before training resumes.

    Lightning saves no random state, and rank 0 alone writes the checkpoint, so the states are gathered there.
    They are restored in `on_train_start`, after set-up and the sanity check, which may draw numbers of their own.
    Generators that data loading owns are seeded per epoch and sample instead (`trainrig.resume.data_order`).
    """

    def __init__(self) -> None:
        self._states_to_restore: list[dict] | None = None

    @override
    def on_save_checkpoint(self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict) -> None:
        checkpoint[CHECKPOINT_KEY] = gathered_from_every_rank(trainer, current_states())

    @override
    def on_load_checkpoint(self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict) -> None:
        self._states_to_restore = checkpoint.get(CHECKPOINT_KEY)

    @override
    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        states, self._states_to_restore = self._states_to_restore, None
        if states is None:
            return
        if len(states) != trainer.world_size:
            rank_zero_warn(
                f"the checkpoint holds the random state of {len(states)} process(es), this run has "
                f"{trainer.world_size}: random draws (dropout, sampling) continue from the run's seed instead, "
                "so the result is not bit-identical"
            )
            return
        restore_states(states[trainer.global_rank])
