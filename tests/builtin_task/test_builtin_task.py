"""The built-in task trains through the interface the tests that hold for every example use (tests/helpers/examples.py
and `small_run_args`), so that a project with no example runs them on it. Here, beside the examples, this is its one
run; in such a project they run it too."""

from tests.helpers.examples import BUILTIN_TASK_CONFIGS
from tests.helpers.runs import assert_fit_left_checkpoints_and_metrics, last_value, run_cli, small_run_args


def test_the_builtin_task_trains_as_an_example_does(tmp_path):
    (config,) = BUILTIN_TASK_CONFIGS
    run_cli("fit", small_run_args(config, tmp_path, None, "--trainer.limit_train_batches", "10"))
    rows = assert_fit_left_checkpoints_and_metrics(tmp_path, config)
    assert last_value(rows, "val/acc") > 0.9, "the clusters are apart: ten steps learn them"
