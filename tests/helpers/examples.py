"""Each example's config and the options that shrink it to a seconds-long CPU run: one module per example, in the
example's own folder (tests/examples/<example>/example.py), so a project keeps the modules of the examples it has.
A module sets `CONFIG` (its file in configs/) and defines
`shrink(shapes_root) -> list[str]`; `LOGGED` lists the metrics every run of it logs, `MEDIA` and `ARTIFACTS` what
its callbacks log besides; `HEAVY = True` marks the launcher comparisons of a slow example `slow`; `DDP_DIFFERS`
says why two DDP ranks do not end where one process on the whole batch ends, where they do not."""

import importlib
from pathlib import Path

from tests.helpers import ROOT

__all__ = ["BUILTIN_TASK_CONFIGS", "CONFIGS", "artifacts", "ddp_differs", "heavy", "logged", "media", "shrink_args"]

_EXAMPLES = [
    importlib.import_module(f"tests.examples.{folder.name}.example")
    for folder in sorted((ROOT / "tests" / "examples").iterdir())
    if (folder / "example.py").is_file()
]
# The tests' own small task, a folder of tests/ with an example.py of its own, which a project keeps only when it has
# no example: the tests that hold for every example then run on it. Here, beside the examples, only its own test does.
_BUILTIN_TASK = [
    importlib.import_module(f"tests.{path.parent.name}.example")
    for path in sorted((ROOT / "tests").glob("*/example.py"))
]
_BY_CONFIG = {module.CONFIG: module for module in [*_EXAMPLES, *_BUILTIN_TASK]}
# One config per example, in folder-name order, for the tests that hold for every example; the built-in task's in a
# project with none.
CONFIGS = [module.CONFIG for module in _EXAMPLES or _BUILTIN_TASK]
# The built-in task's config, where the project has it.
BUILTIN_TASK_CONFIGS = [module.CONFIG for module in _BUILTIN_TASK]


def shrink_args(config: str, shapes_root: Path | None) -> list[str]:
    """The example's own shrinking options; none for a config of no example here."""
    example = _BY_CONFIG.get(config)
    return example.shrink(shapes_root) if example is not None else []


def logged(config: str) -> list[str]:
    """The metrics every run of the example with this config logs."""
    return _BY_CONFIG[config].LOGGED


def heavy(config: str) -> bool:
    """Whether the tests comparing launchers run this example only with -m slow."""
    return getattr(_BY_CONFIG[config], "HEAVY", False)


def media(config: str) -> list[str]:
    """The keys of the images and tables the example's callbacks log."""
    return getattr(_BY_CONFIG[config], "MEDIA", [])


def artifacts(config: str) -> list[str]:
    """The kinds of versioned artifacts the example's callbacks log."""
    return getattr(_BY_CONFIG[config], "ARTIFACTS", [])


def ddp_differs(config: str) -> str | None:
    """Why data-parallel ranks do not compute what one process on their whole batch computes, or None if they do."""
    return getattr(_BY_CONFIG[config], "DDP_DIFFERS", None)
