"""The one way the project unpickles a checkpoint file: `weights_only=True` unless the user trusts the checkpoint.

Unpickling may run any code the file names, and checkpoints are shared and downloaded; torch's `weights_only=True`
rebuilds tensors and plain data only. `--weights_only false`, the option Lightning's own load takes, trusts one
checkpoint.
"""

import pickle
from pathlib import Path
from typing import IO

import jsonargparse.typing
import torch

from trainrig.errors import unsafe_checkpoint

__all__ = ["load_checkpoint"]


def _parsed_value_types() -> list[type]:
    """jsonargparse's restricted types (PositiveInt, ClosedUnitInterval, NotEmptyStr, ...): a value given on the
    command line for an argument annotated with one is an instance of it, and the model's and datamodule's saved
    hyper-parameters keep it so. Each is a plain int, float or str that checks its range when built."""
    return [
        kind
        for kind in vars(jsonargparse.typing).values()
        if isinstance(kind, type)
        and issubclass(kind, (int, float, str))
        and kind.__module__ == jsonargparse.typing.__name__
    ]


# For every `weights_only` load in this process, Lightning's own included: what the project's runs write is loadable.
torch.serialization.add_safe_globals(_parsed_value_types())


def load_checkpoint(
    source: str | Path | IO[bytes], weights_only: bool = True, mmap: bool = False, name: str | None = None
) -> object:
    """`torch.load` onto the CPU; a file that names code to run is refused with a UserInputError naming it (`name`,
    else the path) and `--weights_only false`, unless `weights_only` is False."""
    try:
        return torch.load(source, map_location="cpu", weights_only=weights_only, mmap=mmap)
    except pickle.UnpicklingError as error:
        if (refusal := unsafe_checkpoint(error, name or str(source))) is None:
            raise
        raise refusal from error
