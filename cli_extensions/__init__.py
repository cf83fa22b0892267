"""How an optional part changes `cli.py` without `cli.py` naming it: the part ships one module in this package.

A module here may define any of these functions; `cli.py` calls each one that exists, in module-name order:

- `add_arguments(parser)`: add the part's options to the parser (keep the module light: `--help` imports it).
- `checkpoint_root(config) -> str | None`: where `fit`'s checkpoints are, when not in the run's own folders.
- `run_elsewhere(cli, job) -> bool`: run the parsed subcommand elsewhere, each process calling `job(args)` (cli.run);
  True if it did.
- `release()`: close what the part opened, once the job has ended, successful or not.
"""

import importlib
import pkgutil
from collections.abc import Callable
from functools import cache
from types import ModuleType

__all__ = ["hooks", "load_parts"]


@cache
def load_parts() -> tuple[ModuleType, ...]:
    """Every part's module, imported (which also registers what a part registers, such as its strategies)."""
    return tuple(importlib.import_module(f"{__name__}.{found.name}") for found in pkgutil.iter_modules(__path__))


def hooks(name: str) -> list[Callable]:
    """Every part's function called `name`."""
    return [getattr(module, name) for module in load_parts() if hasattr(module, name)]
