"""A `--ckpt_path` file that cannot be read is refused before anything is built or written, in one line."""

from functools import lru_cache
from pathlib import Path

import torch

from trainrig.errors import UserInputError, one_line

__all__ = ["check_checkpoint_readable", "check_same_parameters", "read_checkpoint_file"]


def read_checkpoint_file(path: str | Path) -> object:
    """The checkpoint file, memory-mapped (only its index is read until a tensor is used): the one load that every
    check before a run shares. Kept for the same unchanged file, so the search for `last` and each check read it once;
    `forget_read_checkpoints` drops the mapping once the checks are done."""
    status = Path(path).stat()
    return _read(str(Path(path).resolve()), status.st_mtime_ns, status.st_size)


@lru_cache(maxsize=1)
def _read(path: str, mtime_ns: int, size: int) -> object:
    return torch.load(path, map_location="cpu", weights_only=False, mmap=True)


def forget_read_checkpoints() -> None:
    """Release the kept mapping, which would otherwise hold a replaced `last.ckpt` on disk for the whole run."""
    _read.cache_clear()


def check_checkpoint_readable(ckpt_path: str | None) -> None:
    """Load the checkpoint file (memory-mapped, so only its index is read) and refuse one torch cannot open or that
    holds no model weights: a truncated copy fails here rather than in a traceback once the run has started.

    A folder (a sharded checkpoint) and a name Lightning resolves itself (`last`, `best`, a URL) are left to the
    loader that reads them.
    """
    if ckpt_path is None or not Path(ckpt_path).is_file():
        return
    try:
        checkpoint = read_checkpoint_file(ckpt_path)
    except Exception as error:  # noqa: BLE001 - whatever torch fails on, the file is not a checkpoint it can read
        raise UserInputError(
            f"checkpoint {ckpt_path} cannot be read ({one_line(error)}); it may be truncated or not a checkpoint: "
            "set --ckpt_path to a complete .ckpt file"
        ) from error
    if not isinstance(checkpoint, dict) or "state_dict" not in checkpoint:
        raise UserInputError(
            f"checkpoint {ckpt_path} holds no model weights (no state_dict); set --ckpt_path to a Lightning .ckpt file"
        )


def check_same_parameters(model, ckpt_path: str | None) -> None:
    """Refuse a checkpoint file whose weights name other parameters than the model's (a layer more or fewer), which
    Lightning would report after the run started, in a page of key names. Shapes: `latest.check_fits`."""
    if ckpt_path is None or not Path(ckpt_path).is_file() or not getattr(model, "strict_loading", True):
        return
    saved = read_checkpoint_file(ckpt_path).get("state_dict", {})
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
