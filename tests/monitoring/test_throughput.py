"""The throughput every run logs at each log step (trainrig/monitoring/throughput.py): the count over the wall time."""

import json
import time

import pytest
from lightning.pytorch import Callback
from typing_extensions import override

from tests.helpers.gpu import BF16, ONE_GPU
from tests.helpers.run_if import run_if
from tests.helpers.runs import EXAMPLE_CONFIGS, read_metrics, run_cli
from tests.monitoring.host_reads import LOG_EVERY, user_run_args

BATCH = 2  # user_run_args' batch size
# An example whose sample is a batch's row (the name generator counts characters instead).
ROWS_EXAMPLE = next((config for config in EXAMPLE_CONFIGS if not config.startswith("lstm")), None)


class LogStepClock(Callback):
    """Writes the wall time from the epoch's start to the end of each log step to `record`."""

    def __init__(self, record: str) -> None:
        self.record = record
        self.times: list[float] = []

    @override
    def on_train_epoch_start(self, trainer, pl_module) -> None:
        self.start = time.perf_counter()

    @override
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if (batch_idx + 1) % LOG_EVERY == 0:
            self.times.append(time.perf_counter() - self.start)

    @override
    def on_train_end(self, trainer, pl_module) -> None:
        with open(self.record, "w") as handle:
            json.dump(self.times, handle)


@pytest.mark.skipif(ROWS_EXAMPLE is None, reason="needs an image example")
def test_samples_a_second_is_the_count_over_the_wall_time(tmp_path, shapes_root):
    """The config's own callbacks, as shipped: the throughput is on without being asked for."""
    record = tmp_path / "clock.json"
    clock = {"class_path": "tests.monitoring.test_throughput.LogStepClock", "init_args": {"record": str(record)}}
    run_cli("fit", user_run_args(ROWS_EXAMPLE, tmp_path, shapes_root, "--trainer.callbacks+", json.dumps(clock)))
    rows = [row for row in read_metrics(tmp_path) if row.get("throughput/samples_per_s")]
    wall = json.loads(record.read_text())
    assert len(rows) == len(wall) >= 2
    logged_seconds = sum(LOG_EVERY * BATCH / float(row["throughput/samples_per_s"]) for row in rows)
    assert abs(logged_seconds - wall[-1]) <= 0.1 * wall[-1], (logged_seconds, wall)
    for row in rows:
        seconds = LOG_EVERY * float(row["throughput/s_per_step"])
        assert abs(seconds - LOG_EVERY * BATCH / float(row["throughput/samples_per_s"])) <= 1e-3 * seconds
        assert 0 <= float(row["throughput/between_steps_share"]) < 1


@run_if(min_cuda_devices=1)
@pytest.mark.parametrize("config", EXAMPLE_CONFIGS)
def test_on_a_gpu_every_log_step_has_peak_memory_flops_a_second_and_mfu(config, tmp_path, shapes_root):
    run_cli("fit", user_run_args(config, tmp_path, shapes_root, *ONE_GPU, *BF16))
    rows = [row for row in read_metrics(tmp_path) if row.get("throughput/samples_per_s")]
    assert len(rows) >= 2
    for row in rows:
        assert float(row["throughput/peak_memory_gib"]) > 0
        assert float(row["throughput/flops_per_s"]) > 0
        assert 0 < float(row["throughput/mfu"]) < 1, row  # the device's peak, from Lightning's table
