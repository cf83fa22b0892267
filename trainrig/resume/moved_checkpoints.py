"""Checkpoint trackers that follow their run to another folder or machine.

A `ModelCheckpoint` restores its best/top-k/last tracking only when its checkpoint folder has the path it had when
the checkpoint was saved; otherwise Lightning keeps `best_model_path` alone, and the next epoch saves another "best"
file beside the old one. A run's folder moves whenever it is resumed elsewhere: a launcher's ranks run in a
temporary folder of their worker, a run directory is copied from the cluster to a laptop. This callback rewrites
the saved paths to the callback's current folder before the tracker loads them.
"""

from pathlib import PurePath

from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.callbacks import ModelCheckpoint
from typing_extensions import override

__all__ = ["MovedCheckpoints"]

PATH_FIELDS = ("best_model_path", "kth_best_model_path", "last_model_path")


class MovedCheckpoints(Callback):
    @override
    def on_load_checkpoint(self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict) -> None:
        """Runs before any callback loads its state (Lightning calls every `on_load_checkpoint` first)."""
        states = checkpoint.get("callbacks") or {}
        for callback in trainer.checkpoint_callbacks:
            if isinstance(callback, ModelCheckpoint) and callback.state_key in states and callback.dirpath:
                states[callback.state_key] = moved(states[callback.state_key], str(callback.dirpath))


def moved(state: dict, dirpath: str) -> dict:
    """A ModelCheckpoint state whose paths in its old `dirpath` point into `dirpath` instead."""
    old = state.get("dirpath")
    if not old or old == dirpath:
        return state

    def relocated(path):
        if not isinstance(path, str) or not path:
            return path
        relative = PurePath(path).relative_to(old) if PurePath(path).is_relative_to(old) else None
        return str(PurePath(dirpath) / relative) if relative is not None else path

    state = {**state, "dirpath": dirpath, **{field: relocated(state.get(field)) for field in PATH_FIELDS}}
    if isinstance(state.get("best_k_models"), dict):
        state["best_k_models"] = {relocated(path): score for path, score in state["best_k_models"].items()}
    return state
