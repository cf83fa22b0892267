"""A pytest plugin (`-p benchmarks.gpu.live_report`) that appends each test's outcome to `$TEST_REPORT` (JSON lines)
the moment it is known, with the failure's text: a run cut off by its time limit, or one that hangs after its last
test, still leaves every result it reached. The GPU check's first call on a real GPU lost its results that way."""

import json
import os


def pytest_runtest_logreport(report) -> None:
    """Every test's call, and any set-up or tear-down that did not pass; under xdist only where the reports meet."""
    if (report.when != "call" and report.passed) or "PYTEST_XDIST_WORKER" in os.environ:
        return
    record = {"test": report.nodeid, "when": report.when, "outcome": report.outcome}
    record["seconds"] = round(report.duration, 1)
    if not report.passed:
        record["why"] = str(report.longrepr)[-4000:]
    with open(os.environ["TEST_REPORT"], "a") as report_file:
        report_file.write(json.dumps(record) + "\n")
