"""Fixtures every test file may use; helpers to import live in tests/helpers/."""

import os
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch is imported

from tests.helpers.run_if import skip_or_fail  # noqa: E402
from tests.helpers.runs import LAUNCHER_VARIABLES  # noqa: E402

SESSION_LAUNCHER_VARIABLES = {name: value for name, value in os.environ.items() if LAUNCHER_VARIABLES.fullmatch(name)}


def pytest_collection_modifyitems(items):
    """Marks `gpu` every test that `run_if` says needs a CUDA device, before `-m` selects: `-m gpu` runs them all."""
    for item in items:
        if (mark := item.get_closest_marker("needs")) is not None and mark.kwargs["cuda"]:
            item.add_marker(pytest.mark.gpu)


@pytest.fixture(autouse=True)
def what_the_test_needs(request):
    """Skips, or under CI fails, a test marked by `tests.helpers.run_if.run_if` whose needs this machine lacks."""
    if (mark := request.node.get_closest_marker("needs")) is not None:
        skip_or_fail(mark)


@pytest.fixture(autouse=True)
def launcher_variables_as_the_session_started():
    yield
    for name in [name for name in os.environ if LAUNCHER_VARIABLES.fullmatch(name)]:
        del os.environ[name]
    os.environ.update(SESSION_LAUNCHER_VARIABLES)


@pytest.fixture(scope="session")
def shapes_root(tmp_path_factory) -> Path:
    """Where the image examples write their generated stand-in data once per test session."""
    return tmp_path_factory.mktemp("generated")
