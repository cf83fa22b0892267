"""One trial as a process group: `cli.py fit` with the trial's overrides, its own MASTER_PORT and log file, stopped
with the driver.

A trial's folder is the user's own: the driver makes it so that only the user can enter it, and reads what decides
which process it signals (`pid`) or what it unpickles (the result submitit writes for a trial run as a cluster job)
only while no other user can have written it.
"""

import ctypes
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

from trainrig.errors import UserInputError

LOG = "trial.log"
PID = "pid"  # {"pid", "started"}: the trial's process (its own group's leader) and its start time
# Fields of /proc/PID/stat counted from the state (field 3 in proc(5)): the process group (5), the CPU time spent in
# user and kernel mode (14, 15) and the start time in clock ticks since boot (22), which no clock adjustment changes.
STATE, GROUP, USER_TIME, SYSTEM_TIME, STARTED = 0, 2, 11, 12, 19
PRIVATE = 0o700  # what the driver makes of a trial folder: the user's alone, whatever the umask
# Variables of an enclosing distributed job, which would make a trial join it instead of starting its own.
JOB_VARIABLES = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "NODE_RANK", "LOCAL_WORLD_SIZE")
PR_SET_PDEATHSIG = 1
# How long the processes an earlier driver left may go without using any CPU before they count as hung and are
# killed. A clock on their whole stop would kill a trial still writing its checkpoint on a loaded machine.
OLD_PROCESS_STALL_S = 120


def start(cli: Path, arguments: list[str], directory: Path, port: int) -> subprocess.Popen:
    """Run `cli fit ARGUMENTS` (`cli`: the project's cli.py) in its own session (Ctrl-C reaches the driver, which stops
    trials with SIGTERM)."""
    environment = {key: value for key, value in os.environ.items() if key not in JOB_VARIABLES}
    environment["MASTER_PORT"] = str(port)
    with (directory / LOG).open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, str(cli), "fit", *arguments],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=environment,
            start_new_session=True,
            preexec_fn=_stop_with_driver,
        )
    # The start time tells this process from a later one given the same id once it has gone (none without /proc).
    fields = _stat(process.pid)
    record = {"pid": process.pid, "started": int(fields[STARTED]) if fields else None}
    (directory / PID).write_text(json.dumps(record))
    (directory / PID).chmod(0o600)
    return process


def private_folder(directory: Path) -> None:
    """Make a folder only the user can enter, whatever the umask; one that exists keeps its mode, for
    `check_only_mine` to judge."""
    directory.mkdir(mode=PRIVATE, parents=True, exist_ok=True)


def check_only_mine(directory: Path, path: Path) -> None:
    """Refuse `path` in the sweep's or a trial's folder `directory` unless no other user can have written it: the
    folder, each one below it down to `path`, and `path` belong to this user and are not writable by group or others.
    A planted file there would choose the process the driver kills, run code when it is unpickled, or name the
    classes every trial imports (the sweep's base.yaml)."""
    relative = path.relative_to(directory).parts
    for part in (directory / Path(*relative[:length]) for length in range(len(relative) + 1)):
        info = part.stat()
        if info.st_uid != os.getuid():
            raise UserInputError(
                f"{part} belongs to another user (uid {info.st_uid}); a sweep uses its folders only if they are "
                "yours: move it away"
            )
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise UserInputError(
                f"{part} is writable by other users (mode {stat.S_IMODE(info.st_mode):o}); a sweep uses its "
                f"folders only if no one else can write them: chmod go-w {part}"
            )


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
    """Before a trial resumes, wait until the process a killed driver left (stopping on SIGTERM) has exited, for as
    long as its process group keeps using the CPU (checkpointing, however slowly); kill the group once it has used
    none for OLD_PROCESS_STALL_S (hung, as in a collective whose peer is gone)."""
    pid_file = directory / PID
    if not pid_file.exists():
        return
    check_only_mine(directory, pid_file)
    try:
        record = json.loads(pid_file.read_text())
        pid, started = int(record["pid"]), int(record["started"])
    except (ValueError, KeyError, TypeError):  # not a record of this driver's, or no /proc: no process to wait for
        return
    used, advanced_at = _group_cpu_ticks(pid), time.monotonic()
    while _runs_trial(pid, started, directory):
        if (now_used := _group_cpu_ticks(pid)) != used:
            used, advanced_at = now_used, time.monotonic()
        elif time.monotonic() - advanced_at > OLD_PROCESS_STALL_S:
            os.killpg(pid, signal.SIGKILL)
            return
        time.sleep(0.2)


def _group_cpu_ticks(group: int) -> int:
    """The CPU time (clock ticks) the live processes of process group `group` have used: it grows while any of them
    works, the one saving the checkpoint or a rank it waits for."""
    ticks = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat(int(entry.name))) is not None and int(fields[GROUP]) == group:
            ticks += int(fields[USER_TIME]) + int(fields[SYSTEM_TIME])
    return ticks


def _runs_trial(pid: int, started: int, directory: Path) -> bool:
    """Whether `pid` is still the trial's process: the one started then (not a later process given its id), the
    leader of its own process group (the group the driver kills), running the trial's command."""
    fields = _stat(pid)
    if fields is None or fields[STATE] == "Z" or int(fields[STARTED]) != started or int(fields[GROUP]) != pid:
        return False
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return f"{directory}/".encode() in command


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat from the state on (the command name before it may hold spaces), or None."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


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
