"""A pytest plugin (`-p benchmarks.gpu.live_report`) that appends each test's outcome to `$TEST_REPORT` (JSON lines)
the moment it is known, with the failure's text: a run cut off by its time limit, or one that hangs after its last
test, still leaves every result it reached. The GPU check's first call on a real GPU lost its results that way."""

import json
import os


class LiveReport:
    def __init__(self, path: str):
        self.path = path

    def pytest_runtest_logreport(self, report) -> None:
        """Every test's call, and any set-up or tear-down that did not pass."""
        if report.when != "call" and report.passed:
            return
        record = {"test": report.nodeid, "when": report.when, "outcome": report.outcome}
        record["seconds"] = round(report.duration, 1)
        if not report.passed:
            record["why"] = str(report.longrepr)[-4000:]
        with open(self.path, "a") as report_file:
            report_file.write(json.dumps(record) + "\n")


def pytest_configure(config) -> None:
    """Writes where the reports meet: in pytest-xdist's controller, not its workers. A worker is told by its config,
    not by `PYTEST_XDIST_WORKER`, which a pytest started from inside a worker's test inherits."""
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(LiveReport(os.environ["TEST_REPORT"]), "live_report_writer")
