"""Every core busy for the length of a test (trainrig/testing/load.py, which the benchmarks use too), for the tests of
what must hold under load, not only on an idle machine."""

from collections.abc import Iterator
from subprocess import Popen

import pytest

from trainrig.testing.load import saturated_cpu

__all__ = ["busy_machine"]


@pytest.fixture
def busy_machine() -> Iterator[list[Popen]]:
    """One CPU-bound process per usable core (os.sched_getaffinity) for the length of the test, stopped and reaped
    at its end, failed or passed; the spinning processes."""
    with saturated_cpu() as spinners:
        yield spinners
