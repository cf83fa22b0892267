"""No training step reads a device value on the host between the steps the loggers write (docs/monitoring.md).

Each example trains as a user runs it (progress bar on, the config's logger and callbacks) for a dozen steps under
`HostReads`, which counts the reads of each step (tests/monitoring/host_reads.py says which it leaves out). On a GPU
each read stalls the host until the queued kernels have run; the GPU variant counts what CUDA reports as
synchronizing (`torch.cuda.set_sync_debug_mode`) over the same steps. The throughput every run logs is on in these
runs (the name generator counts its characters on the device, read at log steps only); under DDP and fsdp2:
tests/monitoring/mlp/.
"""

import json

import pytest

from tests.helpers.gpu import BF16, ONE_GPU
from tests.helpers.run_if import run_if
from tests.helpers.runs import EXAMPLE_CONFIGS, run_cli
from tests.monitoring.host_reads import assert_reads_only_at_log_steps, user_run_args


def reads_per_step(config: str, tmp_path, shapes_root, *extra: str, on_gpu: bool = False) -> list[int]:
    """The reads of each step after the first (which sets things up once), but for the epoch's last."""
    record = tmp_path / "reads.json"
    counter = {"class_path": "tests.monitoring.host_reads.HostReads", "init_args": {"record": str(record)}}
    counter["init_args"]["on_gpu"] = on_gpu
    run_cli("fit", [*user_run_args(config, tmp_path, shapes_root, *extra), "--trainer.callbacks+", json.dumps(counter)])
    (epoch,) = json.loads(record.read_text())
    return epoch[1:]


@pytest.mark.parametrize("config", EXAMPLE_CONFIGS)
def test_at_most_one_step_in_log_every_n_steps_reads_a_device_value(config, tmp_path, shapes_root):
    assert_reads_only_at_log_steps(config, reads_per_step(config, tmp_path, shapes_root))


@run_if(min_cuda_devices=1)
@pytest.mark.parametrize("config", EXAMPLE_CONFIGS)
def test_on_a_gpu_at_most_one_step_in_log_every_n_steps_synchronizes(config, tmp_path, shapes_root):
    reads = reads_per_step(config, tmp_path, shapes_root, *ONE_GPU, *BF16, on_gpu=True)
    assert_reads_only_at_log_steps(config, reads)
