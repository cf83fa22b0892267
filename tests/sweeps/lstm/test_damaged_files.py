"""A sweep folder damaged between two drivers (a crash mid-write, a full disk, a neighbour's hand): the files of a real
sweep stopped mid-trial, cut short one at a time, and the folder made writable by others, stop the next driver with
one line and exit 2, writing nothing."""

import signal
import subprocess
import time
from pathlib import Path

import pytest

import sweep
from tests.helpers.runs import ROOT
from tests.sweeps.lstm.runs import LR, TIMEOUT_S, sweep_command
from tests.sweeps.studies import sweep_file
from trainrig.sweeps import run

SPACE = {LR: {"type": "float", "low": 1e-4, "high": 1e-2, "log": True}}


def contents(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def cut_short(path: Path, line: int) -> bytes:
    """Cut line `line` of `path` in half, as a write interrupted mid-way that later lines followed; the old bytes."""
    intact = path.read_bytes()
    lines = intact.split(b"\n")
    lines[line] = lines[line][: len(lines[line]) // 2]
    path.write_bytes(b"\n".join(lines))
    return intact


def refused(arguments: list[str], folder: Path, capsys, monkeypatch) -> str:
    """The next driver's one error line (`sweep.py ARGUMENTS`, in this process); it wrote nothing in `folder`. The
    training config is the one the first driver resolved and saved (`base.yaml`), which spares a `cli.py` start."""
    monkeypatch.setattr(run, "resolved_training_config", lambda cli, arguments: (folder / "base.yaml").read_text())
    before = contents(folder)
    with pytest.raises(SystemExit) as ended:
        sweep.main(arguments)
    stderr = capsys.readouterr().err
    assert ended.value.code == 2, stderr[-3000:]
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and stderr.rstrip().endswith(errors[0]) and "Traceback" not in stderr
    assert contents(folder) == before
    return errors[0]


def test_a_damaged_channel_or_journal_or_an_open_folder_is_one_line_exit_2_and_nothing_written(
    tmp_path, capsys, monkeypatch
):
    command = sweep_command(
        tmp_path,
        *("--trainer.max_epochs", "100", "--trainer.limit_train_batches", "20", "--trainer.val_check_interval", "2"),
        *("--sweep", sweep_file(tmp_path / "space.json", SPACE, trials=1, pruner="none")),
    )
    folder = tmp_path / "sweep_lstm"
    reports = folder / "trial_0" / "channel" / "reports.jsonl"
    driver = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while not (reports.exists() and reports.read_bytes().count(b"\n")):  # a validation reported
            assert time.monotonic() < deadline and driver.poll() is None, "the trial never reported"
            time.sleep(0.1)
        driver.send_signal(signal.SIGTERM)  # the trial checkpoints and stops; the study keeps it running
        assert driver.wait(timeout=TIMEOUT_S) == 143
    finally:
        driver.kill()
        driver.wait()

    intact = cut_short(reports, 0)
    assert refused(command[2:], folder, capsys, monkeypatch).startswith(f"error: {reports} holds ")
    reports.write_bytes(intact)

    journal = folder / "study.journal"
    intact_journal = cut_short(journal, 1)
    assert refused(command[2:], folder, capsys, monkeypatch).startswith(
        f"error: {journal} is not a readable Optuna journal"
    )
    journal.write_bytes(intact_journal)

    folder.chmod(0o775)  # a group's member could rewrite base.yaml, whose class paths every trial imports
    assert refused(command[2:], folder, capsys, monkeypatch) == (
        f"error: {folder} is writable by other users (mode 775); a sweep uses its folders only if no one else can "
        f"write them: chmod go-w {folder}"
    )
