"""Fixtures every test file may use; helpers to import live in tests/helpers/."""

import os
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch is imported

from tests.helpers.run_if import skip_or_fail  # noqa: E402
from tests.helpers.runs import LAUNCHER_VARIABLES  # noqa: E402
from trainrig.testing.shares import members_of_share, parse_share  # noqa: E402

SLOW_SHARE = pytest.StashKey[list[str]]()

SESSION_LAUNCHER_VARIABLES = {name: value for name, value in os.environ.items() if LAUNCHER_VARIABLES.fullmatch(name)}


def pytest_addoption(parser):
    parser.addoption(
        "--slow-share",
        metavar="K/N",
        type=parse_share,
        help="with the default selection, also run share K of N of the tests marked slow (.ci/run: docs/testing.md)",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Marks `gpu` every test that `run_if` says needs a CUDA device, and `slow_share` the slow tests of the share
    `--slow-share` names, before `-m` selects: `-m gpu` runs them all, and the default run takes in the share."""
    for item in items:
        if (mark := item.get_closest_marker("needs")) is not None and mark.kwargs["cuda"]:
            item.add_marker(pytest.mark.gpu)
    if (share := config.getoption("slow_share")) is None:
        return
    if config.option.markexpr != "not slow":
        raise pytest.UsageError("--slow-share adds to the default selection (-m 'not slow'); leave out -m")
    config.option.markexpr = "not slow or slow_share"
    slow = [item.nodeid for item in items if item.get_closest_marker("slow") is not None]
    chosen = members_of_share(slow, *share)
    for item in items:
        if item.nodeid in chosen:
            item.add_marker(pytest.mark.slow_share)
    config.stash[SLOW_SHARE] = sorted(chosen)
    if hasattr(config, "workeroutput"):  # a pytest-xdist worker: the controller prints the summary
        config.workeroutput["slow_share"] = sorted(chosen)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """Under pytest-xdist the workers collect, each the same tests: the controller takes the share they chose."""
    if (chosen := getattr(node, "workeroutput", {}).get("slow_share")) is not None:  # none from a crashed worker
        node.config.stash[SLOW_SHARE] = chosen


def pytest_terminal_summary(terminalreporter, config):
    """Says which slow tests the run took in, so a CI log shows what its share covered."""
    if (chosen := config.stash.get(SLOW_SHARE, None)) is not None:
        index, count = config.getoption("slow_share")
        terminalreporter.section(f"slow share {index}/{count}: {len(chosen)} slow tests")
        for test_id in chosen:
            terminalreporter.write_line(test_id)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Skips, or under CI fails, a test marked by `tests.helpers.run_if.run_if` whose needs this machine lacks,
    before any fixture it uses is set up: a module's fixture (a cluster it starts) would otherwise start first and fail
    on what is missing."""
    if (mark := item.get_closest_marker("needs")) is not None:
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
