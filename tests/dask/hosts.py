"""A Dask cluster on emulated hosts (trainrig/testing/hosts.py), started as docs/dask.md starts one, for the tests of
Dask jobs across machines."""

import subprocess
from pathlib import Path

from trainrig.testing.hosts import Host

SCHEDULER_PORT = 8786


def start_dask(
    python: Path, scheduler_host: Host, worker_hosts: list[Host], protocol: str = "tcp", **options: list[str]
) -> tuple[str, list[str], list[subprocess.Popen]]:
    """A Dask scheduler on `scheduler_host` and one worker on each of `worker_hosts`, as docs/dask.md starts them,
    with no output; `options["scheduler"]` and `options["worker"]`: more options of each. Returns the scheduler's
    address, the worker's command (to start one again) and the worker processes."""
    address = f"{protocol}://{scheduler_host.address}:{SCHEDULER_PORT}"
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    scheduler = [python, "-m", "dask", "scheduler", "--protocol", protocol, "--host", scheduler_host.address]
    scheduler_host.popen(
        [*scheduler, "--port", str(SCHEDULER_PORT), "--no-dashboard", *options.get("scheduler", [])], **quiet
    )
    worker = [python, "-m", "dask", "worker", address, "--nthreads", "1", "--no-dashboard", *options.get("worker", [])]
    return address, worker, [host.popen(worker, **quiet) for host in worker_hosts]
