"""Sharded checkpoints (a directory: each process's shards, torch.distributed.checkpoint's `.metadata`, and
`meta.pt` with everything else) read as the single-file checkpoint every other strategy writes.

Any strategy, any number of processes, `predict`, `test` and the generator load a sharded checkpoint through
this, and `python -m trainrig.resume.consolidate DIRECTORY FILE` turns one into a file a user can share.
"""

import os
import pickle
import shutil
from pathlib import Path
from typing import Any

import torch
from torch.distributed.checkpoint import BytesStorageMetadata, FileSystemReader
from torch.distributed.checkpoint.default_planner import _EmptyStateDictLoadPlanner
from torch.distributed.checkpoint.state_dict_loader import _load_state_dict
from typing_extensions import override

from trainrig.errors import TRUST_OPTION, UserInputError
from trainrig.resume.loading import load_checkpoint

METADATA_NAME = "meta.pt"  # the fsdp2 strategy's (and Lightning's ModelParallelStrategy's) name for the rest
SHARDS_INDEX = ".metadata"  # torch.distributed.checkpoint's index of the shards, written last by its coordinator
# What an index written by torch.distributed.checkpoint's FileSystemWriter names, found by unpickling the indexes of
# this project's fsdp2 runs: its own dataclasses, where the shards lie, the checkpoint's id (a path), and the tensors'
# sizes, dtypes, layouts and memory formats. torch reads the index with plain `pickle.load`, which would run any
# code a shared directory's index names.
INDEX_MODULE = "torch.distributed.checkpoint.metadata"
INDEX_GLOBALS = {
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
    ("torch.serialization", "_get_layout"),
    ("torch", "Size"),
    ("pathlib", "PosixPath"),
}


def is_sharded_checkpoint(path) -> bool:
    path = Path(path)
    return path.is_dir() and (path / METADATA_NAME).is_file()


def read_metadata(path: Path, weights_only: bool = True) -> dict[str, Any]:
    """The checkpoint without its tensors (progress, callbacks, hyperparameters): cheap, for finding a resume point.
    Raises when the shards' index is missing, i.e. the directory was never completed; a UserInputError when either
    file names code to run, unless `weights_only` is False."""
    if not (path / SHARDS_INDEX).is_file():
        raise FileNotFoundError(f"{path.name} has no {SHARDS_INDEX}: its shards were never completed")
    check_shards(path, weights_only)
    return load_checkpoint(path / METADATA_NAME, weights_only)


def check_shards(path: Path, weights_only: bool = True) -> None:
    """Check what torch.distributed.checkpoint unpickles in full when it loads the directory, before it does: its
    index (`shards_index`), and the values that are not tensors, which it keeps pickled in the shard files (an
    optimizer's learning rate and betas, its parameters' names) and loads with `weights_only=False` (its planner's
    `load_bytes`). Each value is unpickled weights-only here; one that names code to run is refused in one line,
    unless `weights_only` is False."""
    index = shards_index(path, weights_only)
    if not weights_only:
        return
    pickled = {name for name, entry in index.state_dict_metadata.items() if isinstance(entry, BytesStorageMetadata)}
    if not pickled:
        return
    planner = _PickledValues(path, pickled)
    _load_state_dict({}, storage_reader=FileSystemReader(path), planner=planner, no_dist=True)
    if planner.failure is not None:
        raise planner.failure


class _IndexUnpickler(pickle.Unpickler):
    """Resolves only the names an index of shards holds (`INDEX_GLOBALS`); any other name is refused unresolved."""

    @override
    def find_class(self, module: str, name: str) -> Any:
        value = getattr(torch, name, None) if module == "torch" else None
        if module == INDEX_MODULE or (module, name) in INDEX_GLOBALS or isinstance(value, torch.dtype):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name}")


class _PickledValues(_EmptyStateDictLoadPlanner):
    """Reads only the values of `keys` (those stored pickled) and unpickles each weights-only, keeping the first
    failure: torch would wrap one raised here into a page-long exception of its own."""

    def __init__(self, path: Path, keys: set[str]):
        super().__init__(keys=keys)
        self.path = path
        self.failure: Exception | None = None

    @override
    def load_bytes(self, read_item, value) -> None:
        if self.failure is not None:
            return
        try:
            load_checkpoint(value, name=f"{self.path} (its shard value {read_item.dest_index.fqn})")
        except Exception as error:  # noqa: BLE001 - raised once torch's load is over, whatever it is
            self.failure = error


def shards_index(path: Path, weights_only: bool = True) -> Any:
    """torch.distributed.checkpoint's index of a sharded checkpoint, unpickled with only the names such an index
    holds: a directory whose index names anything else is refused in one line before torch reads it (with plain
    pickle) to load the shards. `weights_only=False` (the user trusts the checkpoint) lifts the restriction."""
    with open(Path(path) / SHARDS_INDEX, "rb") as handle:
        if not weights_only:
            return pickle.load(handle)
        try:
            return _IndexUnpickler(handle).load()
        except pickle.UnpicklingError as error:
            raise UserInputError(
                f"checkpoint {path}: its {SHARDS_INDEX} names {error}, which an index of shards never holds, and "
                f"loading it could run code: pass {TRUST_OPTION} only for a checkpoint you trust"
            ) from error


def saved_shapes(path: Path, weights_only: bool = True) -> dict[str, torch.Tensor]:
    """Each model tensor as an empty tensor of its full shape (on the meta device), from the shards' index alone."""
    prefix = "state_dict."
    return {
        name.removeprefix(prefix): torch.empty(entry.size, device="meta")
        for name, entry in shards_index(path, weights_only).state_dict_metadata.items()
        if name.startswith(prefix) and hasattr(entry, "size")
    }


def consolidated(path, weights_only: bool = True) -> dict[str, Any]:
    """The whole checkpoint in one process's memory, as a single-file Lightning checkpoint: `state_dict` by name,
    `optimizer_states` keyed by parameter index the way `torch.optim.Optimizer.state_dict()` keys them."""
    path = Path(path)
    checkpoint = read_metadata(path, weights_only)  # checks what torch.distributed.checkpoint would unpickle in full
    shards: dict[str, Any] = {}
    _load_state_dict(shards, storage_reader=FileSystemReader(path), planner=_EmptyStateDictLoadPlanner(), no_dist=True)
    checkpoint["state_dict"] = shards.pop("state_dict")
    optimizers = sorted((key for key in shards if key.startswith("optimizer_")), key=lambda key: int(key.split("_")[1]))
    checkpoint["optimizer_states"] = [keyed_by_index(shards[key]) for key in optimizers]
    return checkpoint


def keyed_by_index(state: dict[str, Any]) -> dict[str, Any]:
    """An optimizer state keyed by parameter name (torch.distributed.checkpoint's form) keyed by position instead,
    numbered across the parameter groups in order, as the optimizer's own `state_dict()` numbers them."""
    index = {
        name: position
        for position, name in enumerate(name for group in state["param_groups"] for name in group["params"])
    }
    return {
        "state": {index[name]: value for name, value in state["state"].items()},
        "param_groups": [
            {**group, "params": [index[name] for name in group["params"]]} for group in state["param_groups"]
        ],
    }


# A write in progress beside its target: `.<name>.<pid>.partial` holds the new content until it is renamed into place,
# `.<name>.<pid>.old` an old checkpoint directory moved aside to be replaced. A kill can leave either behind
# (abandoned_future.INTERRUPTED_WRITE finds them on resume).
PARTIAL_SUFFIX = ".partial"
MOVED_ASIDE_SUFFIX = ".old"


def hidden_sibling(target: Path, suffix: str, pid: int | None = None) -> Path:
    """`.<name>.<pid><suffix>` in `target`'s directory (the same filesystem, so a rename moves it into place); `pid`
    this process's unless given (fsdp2's ranks all name rank 0's)."""
    return target.with_name(f".{target.name}.{os.getpid() if pid is None else pid}{suffix}")


def replace_path(source: Path, target: Path) -> None:
    """`source` takes `target`'s name, either being a file or a checkpoint directory. A directory cannot replace a
    non-empty one (nor a file) in one rename, so then the old `target` is renamed out of the way first: at every
    moment one of the two names holds a complete checkpoint."""
    if not target.is_dir() and not (source.is_dir() and target.exists()):
        os.replace(source, target)
        return
    old = hidden_sibling(target, MOVED_ASIDE_SUFFIX)
    os.replace(target, old)
    os.replace(source, target)
    if old.is_dir():
        shutil.rmtree(old)
    else:
        old.unlink(missing_ok=True)
