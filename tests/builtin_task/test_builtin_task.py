"""The built-in task trains through the interface the tests that hold for every example use (tests/helpers/examples.py
and `small_run_args`), so that a project with no example runs them on it. Here, beside the examples, this is its one
run; in such a project they run it too."""

import math

from tests.helpers.examples import BUILTIN_TASK_CONFIGS, logged
from tests.helpers.runs import last_value, read_metrics, run_cli, small_run_args


def test_the_builtin_task_trains_as_an_example_does(tmp_path):
    (config,) = BUILTIN_TASK_CONFIGS
    run_cli("fit", small_run_args(config, tmp_path, None, "--trainer.limit_train_batches", "10"))
    (run_dir,) = [path.parent for path in tmp_path.rglob("config.yaml")]
    checkpoints = sorted(path.name for path in (run_dir / "checkpoints").iterdir())
    assert "last.ckpt" in checkpoints and any(name.startswith("best-") for name in checkpoints)
    rows = read_metrics(tmp_path)
    for key in logged(config):
        assert math.isfinite(last_value(rows, key)), f"{key} is not finite"
    assert last_value(rows, "val/acc") > 0.9, "the clusters are apart: ten steps learn them"
