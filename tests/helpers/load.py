"""A machine with every core busy, for the tests of what must hold under load, not only on an idle machine.

Timing assumptions that pass on an idle machine (a worker process starts within seconds) fail on a loaded one, where
the same start can take minutes; a test that saturates the machine finds them.
"""

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

# Pure Python arithmetic: each process keeps one core busy without touching memory, disk or the network.
SPIN = "while True: pass"

# How long a spinning process may take to end after SIGKILL before the helper gives up waiting for it.
REAP_S = 30


@contextmanager
def saturated_cpu(processes: int | None = None) -> Iterator[list[subprocess.Popen]]:
    """Keeps `processes` (default: one per core, os.cpu_count()) CPU-bound processes running for the length of the
    block, then kills and reaps them, also when the block raises.

    Each runs in its own process group (a new session), so that the block's own signals to a group, or a terminal's
    Ctrl-C, never reach them, and killing one group ends exactly one spinner and nothing of the test's.
    """
    spinners: list[subprocess.Popen] = []
    try:
        for _ in range(processes or os.cpu_count() or 1):
            spinners.append(
                subprocess.Popen(
                    [sys.executable, "-c", SPIN],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
        yield spinners
    finally:
        for spinner in spinners:
            try:
                os.killpg(spinner.pid, signal.SIGKILL)
            except ProcessLookupError:  # the group is gone already: killed from outside
                pass
        for spinner in spinners:
            spinner.wait(timeout=REAP_S)


@pytest.fixture
def busy_machine() -> Iterator[list[subprocess.Popen]]:
    """Every core kept busy for the length of the test (`saturated_cpu`); the spinning processes."""
    with saturated_cpu() as spinners:
        yield spinners
