"""Sharded checkpoints (a directory: each process's shards, torch.distributed.checkpoint's `.metadata`, and
`meta.pt` with everything else) read as the single-file checkpoint every other strategy writes.

Any strategy, any number of processes, `predict`, `test` and the generator load a sharded checkpoint through
this, and `python -m trainrig.resume.consolidate DIRECTORY FILE` turns one into a file a user can share.
"""

import os
import shutil
from pathlib import Path
from typing import Any

import torch

METADATA_NAME = "meta.pt"  # the fsdp2 strategy's (and Lightning's ModelParallelStrategy's) name for the rest
SHARDS_INDEX = ".metadata"  # torch.distributed.checkpoint's index of the shards, written last by its coordinator


def is_sharded_checkpoint(path) -> bool:
    path = Path(path)
    return path.is_dir() and (path / METADATA_NAME).is_file()


def read_metadata(path: Path) -> dict[str, Any]:
    """The checkpoint without its tensors (progress, callbacks, hyperparameters): cheap, for finding a resume point.
    Raises when the shards' index is missing, i.e. the directory was never completed."""
    if not (path / SHARDS_INDEX).is_file():
        raise FileNotFoundError(f"{path.name} has no {SHARDS_INDEX}: its shards were never completed")
    return torch.load(path / METADATA_NAME, map_location="cpu", weights_only=False)


def saved_shapes(path: Path) -> dict[str, torch.Tensor]:
    """Each model tensor as an empty tensor of its full shape (on the meta device), from the shards' index alone."""
    from torch.distributed.checkpoint import FileSystemReader

    prefix = "state_dict."
    return {
        name.removeprefix(prefix): torch.empty(entry.size, device="meta")
        for name, entry in FileSystemReader(path).read_metadata().state_dict_metadata.items()
        if name.startswith(prefix) and hasattr(entry, "size")
    }


def consolidated(path) -> dict[str, Any]:
    """The whole checkpoint in one process's memory, as a single-file Lightning checkpoint: `state_dict` by name,
    `optimizer_states` keyed by parameter index the way `torch.optim.Optimizer.state_dict()` keys them."""
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.default_planner import _EmptyStateDictLoadPlanner
    from torch.distributed.checkpoint.state_dict_loader import _load_state_dict

    path = Path(path)
    checkpoint = read_metadata(path)
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


def replace_path(source: Path, target: Path) -> None:
    """`source` takes `target`'s name, either being a file or a checkpoint directory. A directory cannot replace a
    non-empty one (nor a file) in one rename, so then the old `target` is renamed out of the way first: at every
    moment one of the two names holds a complete checkpoint."""
    if not target.is_dir() and not (source.is_dir() and target.exists()):
        os.replace(source, target)
        return
    old = target.with_name(f".{target.name}.{os.getpid()}.old")
    os.replace(target, old)
    os.replace(source, target)
    if old.is_dir():
        shutil.rmtree(old)
    else:
        old.unlink(missing_ok=True)
