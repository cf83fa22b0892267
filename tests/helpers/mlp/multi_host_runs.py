"""The pieces the multi-host tests share: the suite's small MLP job on an emulated host, torchrun, and the same job's
losses on one host (run once per session)."""

import functools
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import IO

from tests.helpers.installed import installed_python
from tests.helpers.runs import ROOT, read_metrics, small_run_args
from trainrig.testing.hosts import EmulatedHosts, Host

RUN_TIMEOUT_S = 240
RENDEZVOUS_PORT = 29400
DDP_TIMEOUT = "0:01:00"
LOSSES = ("train/loss", "val/loss")


def job_args(host: Host) -> list[str]:
    """The test suite's small MLP run, with the config copied onto `host` and every path relative to its directory."""
    shutil.copy(ROOT / "configs" / "mlp.yaml", host.workdir / "mlp.yaml")
    args = small_run_args("mlp.yaml", Path("logs"), Path("shapes"))
    args[args.index("--config") + 1] = "mlp.yaml"
    return args


def torchrun(python: Path, *options: str) -> list[str]:
    return [str(python), "-m", "torch.distributed.run", *options, "-m", "cli", "fit"]


def finished(processes: list[subprocess.Popen], timeout: float = RUN_TIMEOUT_S) -> list[str]:
    """Wait for every process; their combined output."""
    deadline = time.monotonic() + timeout
    return [process.communicate(timeout=max(1.0, deadline - time.monotonic()))[0] for process in processes]


class TimedLines(threading.Thread):
    """Reads a process's stream as it writes it: `.lines` holds (time.monotonic() on arrival, line) pairs."""

    def __init__(self, stream: IO[str]):
        super().__init__(daemon=True)
        self.stream = stream
        self.lines: list[tuple[float, str]] = []
        self.start()

    def run(self) -> None:
        for line in self.stream:
            self.lines.append((time.monotonic(), line))


def losses(log_dir: Path) -> dict[str, list[float]]:
    rows = read_metrics(log_dir)
    return {key: [float(row[key]) for row in rows if row.get(key)] for key in LOSSES}


@functools.cache
def one_host_losses() -> dict[str, list[float]]:
    """The reference: the same job as two ranks on one host (`torchrun --standalone`)."""
    python = installed_python()
    with EmulatedHosts(1) as (host,):
        ranks = ["--trainer.strategy", "ddp", "--trainer.accelerator", "cpu", "--trainer.devices", "2"]
        command = torchrun(python, "--standalone", "--nproc_per_node", "2") + job_args(host) + ranks
        (output,) = finished([host.popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)])
        assert host.processes[0].returncode == 0, output
        reference = losses(host.workdir / "logs")
    assert all(reference.values())
    return reference
