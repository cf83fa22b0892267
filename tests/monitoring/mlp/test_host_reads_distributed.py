"""Under DDP and fsdp2 no training step reads a device value on the host between log steps either, on any process.

Two gloo processes on CPU train `configs/mlp.yaml` as a user runs it for a dozen steps under `HostReads`. Lightning
broadcasts a SIGTERM flag at every step of such a run and reads it (on NCCL, a wait for the GPU); the template skips
that broadcast while it handles SIGTERM itself (trainrig/resume/preemption.py).
"""

import json

import pytest

from tests.helpers.ran import assert_ran_as
from tests.helpers.sharded_runs import DDP, FSDP2
from tests.helpers.strategy_runs import run_ok
from tests.monitoring.host_reads import assert_reads_only_at_log_steps, user_run_args


@pytest.mark.parametrize(("strategy", "ran_as"), [(DDP, "DDPStrategy"), (FSDP2, "FSDP2Strategy")], ids=["ddp", "fsdp2"])
def test_on_two_processes_at_most_one_step_in_log_every_n_steps_reads_a_device_value(
    strategy, ran_as, tmp_path, shapes_root
):
    record = tmp_path / "reads.json"
    counter = {"class_path": "tests.monitoring.host_reads.HostReads", "init_args": {"record": str(record)}}
    args = user_run_args("mlp.yaml", tmp_path, shapes_root, *strategy, "--trainer.accelerator", "cpu")
    run_ok("fit", [*args, "--trainer.callbacks+", json.dumps(counter)])
    assert_ran_as(tmp_path, strategy=ran_as, processes=2)
    for rank in range(2):
        (epoch,) = json.loads((tmp_path / f"reads.rank{rank}.json").read_text())
        assert_reads_only_at_log_steps(f"mlp.yaml, {strategy[1]}, rank {rank}", epoch[1:])
