"""A machine with every core busy, for tests and benchmarks of what must hold under load, not only on an idle machine.

Real training nodes are busy (data loading saturates the cores, other jobs share a login node), and timing
assumptions that pass on an idle machine (a worker process starts within seconds) fail on a loaded one, where the
same start can take minutes. `saturated_cpu` keeps every core this process may run on busy for the length of a
block; `per_core` 2 oversubscribes them. Standard library only.
"""

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["LOAD_MODES", "saturated_cpu", "usable_cores"]

# How long a spinning process may take to end after SIGKILL before the block gives up waiting for it.
REAP_S = 30

# Spinning processes per usable core, by name: the benchmarks' load modes.
LOAD_MODES = {"idle": 0, "saturated": 1, "oversubscribed": 2}


def usable_cores() -> int:
    """The cores this process may run on (its affinity, as a container or `taskset` limits it), not the machine's."""
    return len(os.sched_getaffinity(0))


@contextmanager
def saturated_cpu(per_core: int = 1) -> Iterator[list[subprocess.Popen]]:
    """Keeps `per_core` CPU-bound processes per usable core running for the length of the block, then kills and
    reaps them, also when the block raises or is interrupted.

    Each runs in its own process group (a new session), so that the block's own signals to a group, or a terminal's
    Ctrl-C, never reach them, and killing one group ends exactly one spinner and nothing of the caller's. Each dies
    with this process too (PR_SET_PDEATHSIG is not portable, so the spinner polls its parent instead): a test killed
    by a timeout leaves no load behind.
    """
    spinners: list[subprocess.Popen] = []
    try:
        for _ in range(per_core * usable_cores()):
            spinners.append(
                subprocess.Popen(
                    [sys.executable, "-c", orphan_ending_spin(os.getpid())],
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


def orphan_ending_spin(parent: int) -> str:
    """The spinner's program: pure Python arithmetic, which keeps one core busy without touching memory, disk or the
    network, and every few million iterations (a fraction of a second) a look whether `parent` still runs."""
    return f"import os\nwhile os.getppid() == {parent}:\n    for _ in range(5_000_000): pass\n"
