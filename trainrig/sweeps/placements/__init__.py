"""Where trials run, other than as processes on this machine: an optional part ships one module here with

- `Options`: a dataclass deriving from SweepOptions that adds the part's `--sweep.*` options;
- `placement(options, base, base_path) -> placement | None`: how trials run, given the resolved training config and
  its file (see trainrig.sweeps.local_trials.LocalPlacement for the interface), or None when these options do not ask
  for the part.
"""

import dataclasses
import importlib
import pkgutil
from functools import cache
from pathlib import Path
from types import ModuleType

from trainrig.sweeps.local_trials import LocalPlacement
from trainrig.sweeps.options import SweepOptions

__all__ = ["options_class", "trial_placement"]


@cache
def _modules() -> tuple[ModuleType, ...]:
    return tuple(importlib.import_module(f"{__name__}.{found.name}") for found in pkgutil.iter_modules(__path__))


def options_class() -> type[SweepOptions]:
    """SweepOptions with the options of every part here."""
    classes = tuple(module.Options for module in _modules())
    if len(classes) <= 1:
        return classes[0] if classes else SweepOptions
    return dataclasses.dataclass(type("SweepOptions", classes, {"__doc__": SweepOptions.__doc__}))


def trial_placement(options: SweepOptions, base: dict, base_path: Path) -> LocalPlacement | None:
    """The first part's placement that these options ask for; None runs each trial as processes here."""
    for module in _modules():
        if (placement := module.placement(options, base, base_path)) is not None:
            return placement
    return None
