"""The one way a test checks how a run really ran: the parallelism its own checkpoint records
(trainrig/strategies/record.py), not the options the test passed, which a later option or a launcher can change."""

from pathlib import Path

from tests.helpers.run_dirs import RunDirectory

__all__ = ["assert_ran_as"]


def assert_ran_as(log_dir: Path, **expected) -> None:
    """The single run under `log_dir` ran with `expected` (keys of `parallelism_of`: strategy, processes, nodes,
    environment, device, precision, backend, compiled, and the strategy's layout, e.g. schedule and stages)."""
    record = RunDirectory.only_one_under(log_dir).checkpoint().get("parallelism")
    assert record is not None, f"the checkpoint under {log_dir} records no parallelism"
    assert {key: record.get(key) for key in expected} == expected, f"the run under {log_dir} ran as {record}"
