"""Which process a sweep driver signals: before a trial resumes, the driver waits for the process an earlier driver
left in the trial's folder (`trial_N/pid`) while its group works, and kills the group once it hangs (no CPU used for
a while). Real processes, in this one."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.run_if import missing
from trainrig.errors import UserInputError
from trainrig.sweeps import trials

pytest_plugins = ["tests.helpers.load"]  # busy_machine

SLEEPER = "import sys, time; time.sleep(60)"
# A trial stopping slowly: it keeps the CPU busy for 4 s, four times the stall the tests allow, then exits 0.
SLOW_STOP = "import time\nend = time.monotonic() + 4\nwhile time.monotonic() < end: pass"


@pytest.fixture
def trial_dir(tmp_path, monkeypatch) -> Path:
    """A trial folder as the driver makes it; a process that uses no CPU for 1 s (instead of 120 s) counts as hung."""
    monkeypatch.setattr(trials, "OLD_PROCESS_STALL_S", 1.0)
    directory = tmp_path / "sweep_x" / "trial_0"
    trials.private_folder(directory)
    return directory


@pytest.fixture
def bystander(trial_dir):
    """Someone's process whose command line names the trial's folder (a `tail -f trial_0/trial.log`, say), leading
    its own process group as a trial does; killed at the end if it is still there."""
    started = []

    def start(own_group: bool = True) -> subprocess.Popen:
        command = [sys.executable, "-c", SLEEPER, str(trial_dir / "trial.log")]
        started.append(subprocess.Popen(command, start_new_session=own_group))
        return started[-1]

    yield start
    for process in started:
        process.kill()
        process.wait()


def start_time(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[trials.STARTED])


def survives(process: subprocess.Popen) -> bool:
    """Still running a moment later: a SIGKILL sent just before would have ended it by then."""
    try:
        process.wait(timeout=0.5)
    except subprocess.TimeoutExpired:
        return True
    return False


def plant(trial_dir: Path, pid: int, started: int) -> None:
    (trial_dir / trials.PID).write_text(json.dumps({"pid": pid, "started": started}))
    (trial_dir / trials.PID).chmod(0o600)


def test_the_process_an_earlier_driver_left_is_killed_once_it_hangs(trial_dir, tmp_path):
    cli = tmp_path / "cli.py"
    cli.write_text(SLEEPER)
    process = trials.start(cli, [str(trial_dir / "channel")], trial_dir, port=0)
    try:
        trials.wait_for_earlier_process(trial_dir)
        assert process.wait(timeout=10) == -signal.SIGKILL
    finally:
        process.kill()
        process.wait()


def test_the_process_an_earlier_driver_left_is_waited_for_while_it_works_even_on_a_busy_machine(
    trial_dir, tmp_path, busy_machine
):
    """Busy for longer than the stall the driver allows, on a machine whose cores are all taken: waited for to its
    own end (exit 0), not killed: the driver judges by the CPU it uses, not by a clock."""
    cli = tmp_path / "cli.py"
    cli.write_text(SLOW_STOP)
    process = trials.start(cli, [str(trial_dir / "channel")], trial_dir, port=0)
    try:
        trials.wait_for_earlier_process(trial_dir)
        assert process.wait(timeout=10) == 0, "killed while it worked"
    finally:
        process.kill()
        process.wait()


@pytest.mark.parametrize(
    "case",
    ["its id reused by a later process", "a start time of its own, but in someone else's process group"],
)
def test_a_process_that_is_not_the_trials_survives_though_its_command_line_names_the_trial(trial_dir, bystander, case):
    process = bystander(own_group=case.startswith("its id reused"))
    started = start_time(process.pid)
    plant(trial_dir, process.pid, started - 1 if case.startswith("its id reused") else started)
    trials.wait_for_earlier_process(trial_dir)
    assert survives(process), f"the driver killed a process that is not its trial ({case})"


@pytest.mark.parametrize(
    ("writable", "mode"), [(".", 0o777), (trials.PID, 0o664)], ids=["the trial folder", "the pid file"]
)
def test_a_pid_file_other_users_can_write_is_refused_in_one_line(trial_dir, bystander, writable, mode):
    process = bystander()
    plant(trial_dir, process.pid, start_time(process.pid))
    (trial_dir / writable).chmod(mode)
    with pytest.raises(UserInputError, match="is writable by other users") as refused:
        trials.wait_for_earlier_process(trial_dir)
    assert "\n" not in str(refused.value)
    assert survives(process)


def test_a_trial_folder_of_another_user_is_refused_in_one_line(trial_dir, bystander):
    if os.getuid() != 0:
        missing("needs root, to give a folder to another user")
    process = bystander()
    plant(trial_dir, process.pid, start_time(process.pid))
    os.chown(trial_dir, 65534, 65534)  # nobody
    with pytest.raises(UserInputError, match="belongs to another user") as refused:
        trials.wait_for_earlier_process(trial_dir)
    assert "\n" not in str(refused.value)
    assert survives(process)
