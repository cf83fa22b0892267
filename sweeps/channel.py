"""The pruning channel between a trial's rank 0 and the driver: a folder of small files in the trial's directory.

At every validation rank 0 appends `{"step", "value"}` to `reports.jsonl` and waits for the driver's
`decision-<step>` file; the decision is broadcast so that every rank stops at the same step. Files work for trials
on the driver's machine (also on an embedded cluster of the launcher) with any Optuna storage, and outlive a driver
that is restarted.
"""

import json
import os
import time
from pathlib import Path

from lightning.pytorch import Callback
from typing_extensions import override

from resume.atomic_io import write_atomically

REPORTS = "reports.jsonl"
PRUNE, CONTINUE = "prune", "continue"
POLL_S = 0.05
__all__ = ["ReportToDriver", "DriverSide"]


class ReportToDriver(Callback):
    """Reports `metric` to the sweep driver after every validation and stops the trial when the driver prunes it.

    Args:
        channel: the folder shared with the driver.
        metric: the logged metric the study optimises.
        driver_pid: the driver's process id; a rank 0 on the driver's machine stops waiting when it is gone.
        timeout_s: how long to wait for a decision before training on unpruned.
    """

    def __init__(self, channel: str, metric: str, driver_pid: int | None = None, timeout_s: float = 600.0):
        self.channel = Path(channel)
        self.metric = metric
        self.driver_pid = driver_pid
        self.timeout_s = timeout_s

    @override
    def on_validation_end(self, trainer, pl_module) -> None:
        if trainer.sanity_checking:
            return
        prune = False
        if trainer.is_global_zero and self.metric in trainer.callback_metrics:
            step = trainer.global_step
            value = float(trainer.callback_metrics[self.metric])
            with (self.channel / REPORTS).open("a") as reports:
                reports.write(json.dumps({"step": step, "value": value}) + "\n")
            prune = self._decision(step) == PRUNE
        if trainer.strategy.broadcast(prune, src=0):
            trainer.should_stop = True

    def _decision(self, step: int) -> str:
        path = self.channel / f"decision-{step}"
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline and self._driver_alive():
            if path.exists():
                return path.read_text().strip()
            time.sleep(POLL_S)
        return CONTINUE

    def _driver_alive(self) -> bool:
        if self.driver_pid is None:
            return True
        try:
            os.kill(self.driver_pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # someone else's process: the pid is on another machine or reused
            return True
        return True


class DriverSide:
    """The driver's end of one trial's channel: reads new reports, writes decisions."""

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
        self._offset += len(complete)
        return [(int(line["step"]), float(line["value"])) for line in map(json.loads, complete.splitlines())]

    def decide(self, step: int, prune: bool) -> bool:
        """Write the decision for `step` unless one was written before (a resumed trial validating that step again);
        returns the decision that stands."""
        path = self.channel / f"decision-{step}"
        if path.exists():
            return path.read_text().strip() == PRUNE
        write_atomically(path, (PRUNE if prune else CONTINUE).encode())
        return prune
