"""Private Lightning, torch and torchmetrics names the project touches, one module per part that touches them, so a
project keeps the entries of the parts it has: the modules here, and an optional part's or example's own list in its
test folder (`tests/<part>/private_api.py`). A module sets `MODULE_NAMES` ({(module, name): used by}) and/or
`ATTRIBUTES` ([(what has it, how to build one, attribute name, used by)])."""

import importlib
import pkgutil

from tests.helpers import ROOT

__all__ = ["ATTRIBUTES", "MODULE_NAMES"]

_PARTS = [importlib.import_module(f"{__name__}.{found.name}") for found in pkgutil.iter_modules(__path__)]
_PARTS += [
    importlib.import_module(".".join(path.relative_to(ROOT).with_suffix("").parts))
    for path in sorted((ROOT / "tests").rglob("private_api.py"))
]
MODULE_NAMES = {key: used_by for part in _PARTS for key, used_by in getattr(part, "MODULE_NAMES", {}).items()}
ATTRIBUTES = [entry for part in _PARTS for entry in getattr(part, "ATTRIBUTES", [])]
