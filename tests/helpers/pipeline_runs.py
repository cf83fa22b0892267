"""Helpers for the pipeline strategy's tests (the image examples' parts)."""

import pytest

from trainrig.strategies.pipeline_schedules import schedule_class, torch_version_problem


def skip_unless_this_torch_runs(schedule: str) -> None:
    """Skip a run of `schedule` on gloo that this torch cannot make; the strategy refuses it in one line instead
    (test_v_schedules_on_gloo_say_which_torch_they_need)."""
    if (problem := torch_version_problem(schedule_class(schedule), "gloo")) is not None:
        pytest.skip(problem)
