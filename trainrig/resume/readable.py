"""A `--ckpt_path` file that cannot be read is refused before anything is built or written, in one line.

Every checkpoint file is read with `weights_only=True`: unpickling a shared or downloaded file may otherwise run any
code it names. `--weights_only false` (the same option Lightning's own load takes) trusts the one file it is given.
"""

from contextlib import AbstractContextManager, nullcontext
from functools import lru_cache, partial
from pathlib import Path

import torch

from trainrig.errors import UserInputError, one_line, unsafe_checkpoint
from trainrig.registry import import_object
from trainrig.resume.loading import load_checkpoint
from trainrig.resume.sharded import is_sharded_checkpoint, read_metadata

__all__ = [
    "check_checkpoint_readable",
    "check_same_parameters",
    "forget_read_checkpoints",
    "read_checkpoint_file",
    "trusted_classes",
]


def read_checkpoint_file(path: str | Path, weights_only: bool = True) -> object:
    """The checkpoint file, memory-mapped (only its index is read until a tensor is used): the one load that every
    check before a run shares. Kept for the same unchanged file, so the search for `last` and each check read it once;
    `forget_read_checkpoints` drops the mapping once the checks are done."""
    status = Path(path).stat()
    return _read(str(Path(path).resolve()), status.st_mtime_ns, status.st_size, weights_only)


@lru_cache(maxsize=1)
def _read(path: str, mtime_ns: int, size: int, weights_only: bool) -> object:
    return load_checkpoint(path, weights_only, mmap=True)


def forget_read_checkpoints() -> None:
    """Release the kept mapping, which would otherwise hold a replaced `last.ckpt` on disk for the whole run."""
    _read.cache_clear()


def trusted_classes(ckpt_path: str | None, weights_only: bool) -> AbstractContextManager:
    """With `--weights_only false`, the classes and functions the checkpoint file names allowed in `weights_only`
    loads for the duration: LightningCLI reads a checkpoint's hyper-parameters with `weights_only=True` whatever the
    option says. Nothing is allowed for any other file, or beyond the block."""
    if weights_only or ckpt_path is None or not Path(ckpt_path).is_file():
        return nullcontext()
    named = torch.serialization.get_unsafe_globals_in_checkpoint(ckpt_path)
    return torch.serialization.safe_globals([import_object(name) for name in named])


def check_checkpoint_readable(ckpt_path: str | None, weights_only: bool = True) -> None:
    """Load the checkpoint file (memory-mapped, so only its index is read) and refuse one torch cannot open, that
    holds more than plain data (unless `weights_only` is False), or that holds no model weights: a truncated copy
    fails here rather than in a traceback once the run has started.

    An http(s) URL is downloaded as Lightning downloads it, into torch's hub cache, where Lightning's own load then
    finds it. Of a sharded checkpoint, only what is not a tensor is read (its index and `meta.pt`). A name Lightning
    resolves itself (`last`, `best`) is left to the search that resolves it.
    """
    if ckpt_path is not None and ckpt_path.startswith(("http://", "https://")):
        read = partial(torch.hub.load_state_dict_from_url, ckpt_path, map_location="cpu", weights_only=weights_only)
    elif ckpt_path is not None and is_sharded_checkpoint(ckpt_path):
        read = partial(sharded_checkpoint_without_tensors, ckpt_path, weights_only)
    elif ckpt_path is not None and Path(ckpt_path).is_file():
        read = partial(read_checkpoint_file, ckpt_path, weights_only)
    else:
        return
    try:
        checkpoint = read()
    except UserInputError:
        raise
    except Exception as error:  # noqa: BLE001 - whatever torch fails on, the file is not a checkpoint it can read
        raise unsafe_checkpoint(error, ckpt_path) or UserInputError(
            f"checkpoint {ckpt_path} cannot be read ({one_line(error)}); it may be truncated or not a checkpoint: "
            "set --ckpt_path to a complete .ckpt file"
        ) from error
    if not isinstance(checkpoint, dict) or "state_dict" not in checkpoint:
        raise UserInputError(
            f"checkpoint {ckpt_path} holds no model weights (no state_dict); set --ckpt_path to a Lightning .ckpt file"
        )


def sharded_checkpoint_without_tensors(path: str, weights_only: bool) -> dict:
    return {"state_dict": None, **read_metadata(Path(path), weights_only)}


def check_same_parameters(model, ckpt_path: str | None, weights_only: bool = True) -> None:
    """Refuse a checkpoint file whose weights name other parameters than the model's (a layer more or fewer), which
    Lightning would report after the run started, in a page of key names. Shapes: `latest.check_fits`."""
    if ckpt_path is None or not Path(ckpt_path).is_file() or not getattr(model, "strict_loading", True):
        return
    saved = read_checkpoint_file(ckpt_path, weights_only).get("state_dict", {})
    # Loaded as the run will load them, so that a model's own load hooks (a staged model renaming keys to its
    # grouping of stages) count; the run loads the same weights again when it restores the checkpoint.
    try:
        loaded = model.load_state_dict(saved, strict=False)
    except RuntimeError as error:  # a parameter of another shape, under a name only a load hook gives it
        raise UserInputError(f"checkpoint {ckpt_path} does not fit this model: {one_line(error)}") from error
    missing, unexpected = loaded.missing_keys, loaded.unexpected_keys
    if missing or unexpected:
        differences = [f"{len(missing)} missing there (e.g. {missing[0]})"] if missing else []
        differences += [f"{len(unexpected)} not in this model (e.g. {unexpected[0]})"] if unexpected else []
        raise UserInputError(
            f"checkpoint {ckpt_path} does not fit this model: parameters {' and '.join(differences)}; use the config "
            "the checkpoint was trained with, or start fresh"
        )
