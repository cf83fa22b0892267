"""LightningDataModules: where each example's data comes from and how it is split and batched.

A datamodule names in `model_arguments` the values it hands to the model (`cli.py` links each to the model's
argument of that name, when the model has one).
"""

import importlib
import inspect
import pkgutil
from functools import cache

from lightning.pytorch import LightningDataModule

__all__ = ["model_arguments"]


@cache
def model_arguments() -> tuple[str, ...]:
    """Every name a datamodule of this package hands to the model, once each.

    A module that fails to import (a package it needs is missing, a bug) is left out, so that the other datamodules'
    configs still run; a config that chooses one of its classes gets the import's own error from the parser."""
    names: dict[str, None] = {}
    for found in pkgutil.iter_modules(__path__):
        try:
            module = importlib.import_module(f"{__name__}.{found.name}")
        except Exception:  # whatever the module's own code raises: reported when a config names it
            continue
        for _, datamodule in inspect.getmembers(module, inspect.isclass):
            if issubclass(datamodule, LightningDataModule):
                names |= dict.fromkeys(getattr(datamodule, "model_arguments", ()))
    return tuple(names)
