"""The load the tests and benchmarks under load put on the machine (trainrig/testing/load.py): every usable core
busy, and nothing left running after the block, whatever ends it."""

import os
import signal
import time

import psutil
import pytest

from trainrig.testing.load import LOAD_MODES, saturated_cpu, usable_cores


@pytest.mark.parametrize("mode", ["saturated", "oversubscribed"])
def test_the_load_keeps_every_usable_core_busy_and_ends_its_processes_even_on_failure(mode):
    with pytest.raises(RuntimeError), saturated_cpu(LOAD_MODES[mode]) as spinners:
        assert len(spinners) == LOAD_MODES[mode] * usable_cores() == LOAD_MODES[mode] * len(os.sched_getaffinity(0))
        assert all(os.getpgid(spinner.pid) == spinner.pid != os.getpgid(0) for spinner in spinners), "own groups"
        deadline = time.monotonic() + 30  # the machine may be shared: each gets a share of the cores, not a core
        while not all(psutil.Process(spinner.pid).cpu_times().user > 0.5 for spinner in spinners):
            assert time.monotonic() < deadline, "each one spins"
            time.sleep(0.2)
        raise RuntimeError("the test failed")
    assert all(spinner.returncode == -signal.SIGKILL for spinner in spinners), "killed and reaped"
