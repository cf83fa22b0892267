"""What the project-wide tests need to know of an optional part, declared in the part's own test folder as `part.py`
(tests/<part>/part.py) and found there without being named, as trainrig/registry.py finds a part's plugin.py: a project
without the part has neither the folder nor a word of the part in the tests that run for every project.

A `part.py` sets any of: `LAYERS` (the part's concerns of trainrig and what each may import, added to
tests/architecture/test_layers.py's), `ENTRY_POINTS` (its modules at the root), `DEVELOPMENT_ONLY` (its root folders
that are never installed), `SECTIONS` (its config sections whose options are a class's arguments), `TOOLS` (its
command-line tools: the module with `main`, the module with `option_parser()`), `BAD_OPTIONS` (an entry point's own
options with a wrong value each) and `REFUSED_BY_A_PROCESS` ((script, arguments, what its one line names)).
"""

import importlib
import itertools

from tests.helpers import ROOT

__all__ = ["declared", "declared_items"]

_PARTS = [
    importlib.import_module(".".join(path.relative_to(ROOT).with_suffix("").parts))
    for path in sorted((ROOT / "tests").rglob("part.py"))
]


def declared(name: str) -> list:
    """The entries of every part's `name` (a tuple or list), in the order of the parts' folders."""
    return list(itertools.chain.from_iterable(getattr(part, name, ()) for part in _PARTS))


def declared_items(name: str) -> list[tuple]:
    """The (key, value) pairs of every part's `name` (a dict), in the order of the parts' folders."""
    return list(itertools.chain.from_iterable(getattr(part, name, {}).items() for part in _PARTS))
