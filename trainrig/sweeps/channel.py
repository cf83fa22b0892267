"""The pruning channel between a trial's rank 0 and the driver: a folder of small files in the trial's directory.

At every validation rank 0 appends `{"step", "value"}` to `reports.jsonl` and waits for the driver's
`decision-<step>` file. Files work for trials on the driver's machine with any Optuna storage, and outlive a driver
that is restarted. Plain Python: the driver imports it without torch or Lightning.
"""

import json
import os
import time
from pathlib import Path

from trainrig.errors import UserInputError

REPORTS = "reports.jsonl"
PRUNE, CONTINUE = "prune", "continue"
POLL_S = 0.05
__all__ = ["CONTINUE", "PRUNE", "DriverSide", "report_and_wait"]


def report_and_wait(channel: Path, step: int, value: float, driver_pid: int | None, timeout_s: float) -> bool:
    """Rank 0's side: report `value` at `step`, then whether the driver prunes the trial (False if it does not answer
    within `timeout_s`, or its process on this machine is gone)."""
    with (channel / REPORTS).open("a") as reports:
        reports.write(json.dumps({"step": step, "value": value}) + "\n")
    decision = channel / f"decision-{step}"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and _alive(driver_pid):
        if decision.exists():
            return decision.read_text().strip() == PRUNE
        time.sleep(POLL_S)
    return False


def _alive(pid: int | None) -> bool:
    if pid is None:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: the pid is reused, or the driver is on another machine
        return True
    return True


class DriverSide:
    """The driver's end of one trial's channel: reads new reports, writes decisions.

    `channel` and `transport` are what the trial's ReportToDriver is given: the folder, and no other transport.
    """

    transport = None

    def __init__(self, channel: Path):
        self.channel = channel
        self.channel.mkdir(parents=True, exist_ok=True)
        self._offset = 0

    def new_reports(self) -> list[tuple[int, float]]:
        path = self.channel / REPORTS
        if not path.exists():
            return []
        with path.open() as reports:
            reports.seek(self._offset)
            text = reports.read()
        complete = text[: text.rfind("\n") + 1]  # a line being written is read next time
        reports = []
        for line in complete.splitlines():
            try:
                report = json.loads(line)
                reports.append((int(report["step"]), float(report["value"])))
            except (ValueError, KeyError, TypeError) as error:
                raise UserInputError(
                    f"{path} holds {line[:60]!r}, not a report ({error}); delete the file to go on without the reports "
                    "it holds"
                ) from None
        self._offset += len(complete)
        return reports

    def decide(self, step: int, prune: bool) -> bool:
        """Write the decision for `step` unless one was written before (a resumed trial validating that step again);
        returns the decision that stands."""
        path = self.channel / f"decision-{step}"
        if path.exists():
            return path.read_text().strip() == PRUNE
        partial = path.with_name(f".{path.name}")
        partial.write_text(PRUNE if prune else CONTINUE)
        os.replace(partial, path)  # the trial reads a whole decision or none
        return prune
