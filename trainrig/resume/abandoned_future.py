"""Checkpoint files from a stopped run's abandoned future: saved after the checkpoint the run continues from, by the
process that was then stopped.

A run killed after a `ModelCheckpoint` saved (its best file at an epoch's end, say) and before `last.ckpt` did
continues from the `last.ckpt` before, and saves that file again. Lightning's `ModelCheckpoint`, finding the name
taken, writes `best-...-v1.ckpt` beside it (its version counter), and the run directory is no longer the uninterrupted
run's: two "best" files, the restored tracker naming the new one. A resumed run redoes what came after its
checkpoint, so the files of that future are its own to write again, as the metrics rows logged after the checkpoint
are (trainrig/resume/csv_logger.py).

So every checkpoint carries which run saved it and the number of that save (`SAVED_BY_KEY`), and a run that continues
from its `last.ckpt` (or `previous.ckpt`) removes, before it trains, each checkpoint in its checkpoint callbacks'
folders that the same run saved after that checkpoint and that no restored callback state names. What is not provably
from that future stays: another run's file (a shared `dirpath`), an earlier save, a file a callback state names, one
whose saver is unknown (written without this callback, or by `save_weights_only`), and every file when the run went
back to an older checkpoint of its own while a newer one exists (a named file holds a later save). What a kill left
hidden in the middle of a write is removed too, file or directory: a partial file (trainrig/resume/atomic_io.py), the
fsdp2 strategy's staging directory of shards, and a sharded checkpoint directory it was replacing
(trainrig/resume/sharded.py's `replace_path`). No complete checkpoint ever has such a name. (The strategy's next save
of a name clears that name's staging directories, but a resumed run whose future differs may never save it again.)
"""

import re
import shutil
import uuid
from pathlib import Path

from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.trainer.states import TrainerFn
from typing_extensions import override

from trainrig.resume.atomic_io import is_local
from trainrig.resume.checkpoint import LAST_NAME, PREVIOUS_NAME
from trainrig.resume.latest import say
from trainrig.resume.loading import load_checkpoint
from trainrig.resume.moved_checkpoints import PATH_FIELDS, moved
from trainrig.resume.sharded import METADATA_NAME, MOVED_ASIDE_SUFFIX, PARTIAL_SUFFIX, is_sharded_checkpoint

__all__ = ["SAVED_BY_KEY", "AbandonedFuture"]

# In every checkpoint: {"run": the id of the run that saved it, kept across its resumes; "save": its save's number}.
SAVED_BY_KEY = "saved_by"
# A write that a kill interrupted (sharded.hidden_sibling's names).
INTERRUPTED_WRITE = re.compile(rf"\..+\.\d+({re.escape(PARTIAL_SUFFIX)}|{re.escape(MOVED_ASIDE_SUFFIX)})")


class AbandonedFuture(Callback):
    def __init__(self) -> None:
        self._run = uuid.uuid4().hex  # only global rank 0's is saved, and every rank of a resumed run loads it
        self._next_save = 0

    @override
    def on_save_checkpoint(self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict) -> None:
        checkpoint[SAVED_BY_KEY] = {"run": self._run, "save": self._next_save}
        self._next_save += 1

    @override
    def on_load_checkpoint(self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict) -> None:
        saved_by = checkpoint.get(SAVED_BY_KEY)
        if not _is_saved_by(saved_by):
            return  # saved without this callback: its run cannot tell its files from others'
        self._run, self._next_save = saved_by["run"], saved_by["save"] + 1
        continues_run = trainer.ckpt_path is not None and Path(trainer.ckpt_path).name in (LAST_NAME, PREVIOUS_NAME)
        if trainer.state.fn == TrainerFn.FITTING and trainer.is_global_zero and continues_run:
            remove_abandoned_future(trainer, checkpoint, saved_by)


def remove_abandoned_future(trainer: Trainer, checkpoint: dict, saved_by: dict) -> None:
    """Remove, from the checkpoint callbacks' local folders, the files the run saved after `checkpoint` that no
    restored callback state names, and the partial files and directories of interrupted writes."""
    callbacks = [
        callback
        for callback in trainer.checkpoint_callbacks
        if isinstance(callback, ModelCheckpoint) and callback.dirpath and is_local(callback.dirpath)
    ]
    states = checkpoint.get("callbacks") or {}
    named = set()
    for callback in callbacks:
        named |= named_files(moved(states.get(callback.state_key) or {}, str(callback.dirpath)))
    if any(_saved_later(_saved_by_of(path), saved_by) for path in named):
        return  # resumed from an older checkpoint of the run, which went on: its later files are the user's to keep
    for directory in {Path(callback.dirpath).resolve() for callback in callbacks}:
        for path in sorted(directory.iterdir()) if directory.is_dir() else []:
            if INTERRUPTED_WRITE.fullmatch(path.name):
                if path.is_dir():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)
            elif path not in named and _saved_later(_saved_by_of(path), saved_by):
                trainer.strategy.checkpoint_io.remove_checkpoint(path)
                say(f"removed {path}, saved after the checkpoint this run continues from by the run that stopped")


def named_files(state: dict) -> set[Path]:
    """The files a ModelCheckpoint state names: its best, k-th best, last and kept top-k checkpoints."""
    paths = [state.get(field) for field in PATH_FIELDS]
    if isinstance(state.get("best_k_models"), dict):
        paths += list(state["best_k_models"])
    return {Path(path).resolve() for path in paths if isinstance(path, str) and path}


def _saved_later(candidate: dict | None, saved_by: dict) -> bool:
    return candidate is not None and candidate["run"] == saved_by["run"] and candidate["save"] > saved_by["save"]


def _is_saved_by(value) -> bool:
    return isinstance(value, dict) and isinstance(value.get("run"), str) and isinstance(value.get("save"), int)


def _saved_by_of(path: Path) -> dict | None:
    """The run and save a checkpoint file (or sharded directory) records, None when it records none or cannot be
    read: memory-mapped, so only its index is read, never its tensors."""
    if path.name.startswith(".") or not (path.is_file() or is_sharded_checkpoint(path)):
        return None
    try:
        checkpoint = load_checkpoint(path / METADATA_NAME if path.is_dir() else path, mmap=True)
    except Exception:  # noqa: BLE001 - a file that cannot be read is not provably from the abandoned future
        return None
    saved_by = checkpoint.get(SAVED_BY_KEY) if isinstance(checkpoint, dict) else None
    return saved_by if _is_saved_by(saved_by) else None
