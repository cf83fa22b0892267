"""One trial as a process group: `cli.py fit` with the trial's overrides, its own MASTER_PORT and log file, stopped
with the driver."""

import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

LOG = "trial.log"
PID = "pid"
# Variables of an enclosing distributed job, which would make a trial join it instead of starting its own.
JOB_VARIABLES = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "NODE_RANK", "LOCAL_WORLD_SIZE")
PR_SET_PDEATHSIG = 1
OLD_PROCESS_WAIT_S = 120


def start(cli: Path, arguments: list[str], directory: Path, port: int) -> subprocess.Popen:
    """Run `cli fit ARGUMENTS` (`cli`: the project's cli.py) in its own session (Ctrl-C reaches the driver, which stops
    trials with SIGTERM)."""
    environment = {key: value for key, value in os.environ.items() if key not in JOB_VARIABLES}
    environment["MASTER_PORT"] = str(port)
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / LOG).open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, str(cli), "fit", *arguments],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=environment,
            start_new_session=True,
            preexec_fn=_stop_with_driver,
        )
    (directory / PID).write_text(str(process.pid))
    return process


def _stop_with_driver() -> None:
    """SIGTERM when the driver dies, even by SIGKILL: the trial checkpoints and exits 143, and the next driver resumes
    it instead of finding it still running."""
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def stop(process: subprocess.Popen) -> None:
    """Ask a trial to checkpoint and stop (exit 143)."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:  # exited since
            pass


def wait_for_earlier_process(directory: Path) -> None:
    """Before a trial resumes, wait until the process a killed driver left (stopping on SIGTERM) has exited."""
    pid_file = directory / PID
    if not pid_file.exists():
        return
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + OLD_PROCESS_WAIT_S
    while _runs_trial(pid, directory):
        if time.monotonic() > deadline:
            os.killpg(pid, signal.SIGKILL)
            return
        time.sleep(0.2)


def _runs_trial(pid: int, directory: Path) -> bool:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
        status = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return status != "Z" and f"{directory}/".encode() in command


def free_port(taken: set[int]) -> int:
    while True:
        with socket.socket() as probe:
            probe.bind(("", 0))
            port = probe.getsockname()[1]
        if port not in taken:
            return port


def failure_cause(directory: Path, exit_code: int) -> str:
    """The trial's one-line error (`error: ...` from cli.py), else its last output line."""
    lines = (directory / LOG).read_text(errors="replace").splitlines() if (directory / LOG).exists() else []
    errors = [line for line in lines if line.startswith("error: ")]
    cause = errors[-1].removeprefix("error: ") if errors else (lines[-1] if lines else "no output")
    return f"exit {exit_code}: {cause}"
