"""The template's progress bar (trainrig/monitoring/progress_bar.py): the loss and samples a second as of the last log
step, redrawn at most every `min_interval_s`, so that a fast loop spends its host time on the steps, not on drawing."""

import json
import re

import pytest

from tests.helpers.runs import EXAMPLE_CONFIGS, run_cli
from tests.monitoring.host_reads import STEPS, user_run_args

BAR = "trainrig.monitoring.progress_bar.LogStepProgressBar"


def test_the_progress_bar_shows_the_loss_and_samples_a_second_as_of_the_last_log_step(tmp_path, shapes_root, capfd):
    run_cli("fit", user_run_args(EXAMPLE_CONFIGS[-1], tmp_path, shapes_root))
    shown = capfd.readouterr().out
    assert "train/loss=" in shown and "throughput/samples_per_s=" in shown, shown[-2000:]


@pytest.mark.parametrize(
    ("min_interval_s", "drawn"),
    [(0, set(range(STEPS + 1))), (3600, {0, 1, STEPS})],  # every batch; the start, the first and last batches
    ids=["every batch", "once an hour"],
)
def test_the_bar_redraws_the_training_count_at_most_every_min_interval(
    min_interval_s, drawn, tmp_path, shapes_root, capfd
):
    bar = {"class_path": BAR, "init_args": {"min_interval_s": min_interval_s}}
    run_cli("fit", user_run_args(EXAMPLE_CONFIGS[-1], tmp_path, shapes_root, "--trainer.callbacks+", json.dumps(bar)))
    counts = re.findall(rf"Epoch 0: +\d+%\|[^|]*\| (\d+)/{STEPS} ", capfd.readouterr().out)
    assert set(map(int, counts)) == drawn, counts
