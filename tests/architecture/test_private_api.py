"""Every private Lightning, torch and torchmetrics name the project touches, in the lists of
tests/architecture/private_api/ and of each optional part's `private_api.py` (one module per part) that an upgrade
checks.

A private name can change or vanish in any release without a deprecation. Each entry says where the project uses
it; the test fails naming the entry that no longer resolves, so an upgrade shows each touch point at once. Two
more tests keep the list whole: a private name imported from those libraries anywhere in the project must be in it,
and so must each private attribute the project touches on a library's objects (`metric._update_count`), or uses or
overrides in a subclass of a library's class (`self._num_nodes` in a DDPStrategy).
"""

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

from tests.architecture.private_api import ATTRIBUTES, MODULE_NAMES
from tests.helpers import ROOT

LIBRARIES = ("lightning", "torch", "torchmetrics")


@pytest.mark.parametrize(("module", "name"), list(MODULE_NAMES), ids=[name for _, name in MODULE_NAMES])
def test_private_module_name_still_exists(module, name):
    assert hasattr(importlib.import_module(module), name), f"{module}.{name}, used by {MODULE_NAMES[module, name]}"


@pytest.mark.parametrize(("owner", "build", "name", "used_by"), ATTRIBUTES, ids=[entry[2] for entry in ATTRIBUTES])
def test_private_attribute_still_exists(owner, build, name, used_by):
    assert hasattr(build(), name), f"{owner}.{name}, used by {used_by}"


PRIVATE_IMPORT = re.compile(r"^from ((?:" + "|".join(LIBRARIES) + r")\S*) import (\([^)]*\)|[^\n]+)", re.M)


def test_every_private_import_is_listed():
    listed = set(MODULE_NAMES)
    unlisted = []
    for path in ROOT.rglob("*.py"):
        if ".venv" in path.parts or path.name == Path(__file__).name:
            continue
        for module, names in PRIVATE_IMPORT.findall(path.read_text()):
            for name in re.findall(r"\b(_[A-Za-z]\w*)", names):
                if (module, name) not in listed:
                    unlisted.append(f"{path.relative_to(ROOT)}: {module}.{name}")
    assert not unlisted, f"private names missing from tests/architecture/private_api/: {unlisted}"


# Attribute uses: `obj._name` on anything but the object's own class, and `self._name` (or a method `_name`) in a
# class whose library base defines that name. Both must be listed by name in tests/architecture/private_api/.
PROJECT_PACKAGES = ("trainrig", "models", "lightning_modules", "datamodules", "callbacks", "benchmarks", "tests", "cli")
OWN_RECEIVERS = ("self", "cls")


def project_files() -> list[Path]:
    skipped = {".venv", "private_api"}
    return [
        path
        for path in sorted(ROOT.rglob("*.py"))
        if not skipped & set(path.relative_to(ROOT).with_suffix("").parts)
        and "{{" not in str(path)
        and path.name != Path(__file__).name
    ]


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("__")


def library_bases_defining(owner: type, name: str) -> list[str]:
    """The classes outside the project, in `owner`'s MRO, whose source names `name`."""
    found = []
    for base in owner.__mro__[1:]:
        if base.__module__.split(".")[0] in PROJECT_PACKAGES or base is object:
            continue
        try:
            source = inspect.getsource(base)
        except (OSError, TypeError):
            source = ""
        if name in vars(base) or re.search(rf"\b{re.escape(name)}\b", source):
            found.append(f"{base.__module__}.{base.__qualname__}")
    return found


def private_attribute_uses(path: Path) -> list[tuple[str, str]]:
    """(name, where) for each private attribute `path` touches that its own classes do not own."""
    tree = ast.parse(path.read_text())
    module = None
    uses = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_private(node.attr):
            receiver = node.value
            own = isinstance(receiver, ast.Name) and receiver.id in OWN_RECEIVERS
            own |= isinstance(receiver, ast.Call) and ast.unparse(receiver.func) == "super"
            if not own:
                uses.append((node.attr, f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(node)}"))
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        names = {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute) and is_private(n.attr)}
        names |= {
            n.name for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and is_private(n.name)
        }
        if not names:
            continue
        module = module or importlib.import_module(".".join(path.relative_to(ROOT).with_suffix("").parts))
        owner = getattr(module, node.name)
        for name in sorted(names):
            if bases := library_bases_defining(owner, name):
                uses.append((name, f"{path.relative_to(ROOT)}: {node.name}.{name} (from {bases[0]})"))
    return uses


def test_every_private_attribute_use_is_listed():
    listed = {name for _, name in MODULE_NAMES} | {entry[2] for entry in ATTRIBUTES}
    unlisted = [where for path in project_files() for name, where in private_attribute_uses(path) if name not in listed]
    assert not unlisted, f"private attributes missing from tests/architecture/private_api/: {unlisted}"
