"""Every private Lightning, torch and torchmetrics name the project touches, in the lists of
tests/helpers/private_api/ (one module per part) that an upgrade checks.

A private name can change or vanish in any release without a deprecation. Each entry says where the project uses
it; the test fails naming the entry that no longer resolves, so an upgrade shows each touch point at once. A
second test keeps the list whole: a private name imported from those libraries anywhere in the project must be in
it.
"""

import importlib
import re
from pathlib import Path

import pytest

from tests.helpers import ROOT
from tests.helpers.private_api import ATTRIBUTES, MODULE_NAMES

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
    assert not unlisted, f"private names missing from tests/helpers/private_api/: {unlisted}"
