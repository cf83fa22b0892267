"""A run preempted again and again and continued each time elsewhere: fsdp2 on 4 processes, on 2, then DDP, one
device, and fsdp2 again. Each leg is stopped by a real SIGTERM, and the next one continues with `--ckpt_path last`
from the step and data position the last one saved: the run ends as the uninterrupted one, within float tolerance (all
but one epoch aggregate: ACROSS_WORLD_SIZES). Several processes settle a stop request a step later, at the latest at
the epoch's last step (`stopped_at`), so the legs of several processes stop at epoch ends; the one-device leg stops in
the middle of an epoch, which fsdp2 on two processes continues.

The MLP trains on a global batch of 16 (two steps per epoch) on every world size: the resumable sampler deals each
epoch's order to the ranks in turn, so every world size takes the same samples at every step (see
trainrig/resume/data_order.py), and a leg that lost or repeated samples would show in the losses.
"""

import pytest
import torch

from tests.helpers.faults import fault
from tests.helpers.mlp.resume_runs import stopped_at
from tests.helpers.mlp.tiny_mlp import mlp_args, write_mlp_settings
from tests.helpers.ran import assert_ran_as
from tests.helpers.runs import read_metrics
from tests.helpers.sharded_runs import FSDP2, assert_same_losses, sharded_checkpoint
from tests.helpers.strategy_runs import TOLERANCE, largest_difference, logged, optimizer_tensors, run_ok, run_processes
from trainrig.resume.sharded import consolidated

EPOCHS, GLOBAL_BATCH, STEPS_PER_EPOCH = 5, 16, 2

# (strategy arguments, processes, the strategy the checkpoint records, the step after which a SIGTERM comes).
LEGS = [
    (("--trainer.strategy", "fsdp2", "--trainer.devices", "4"), 4, "FSDP2Strategy", 3),  # stops at epoch 2's end
    (FSDP2, 2, "FSDP2Strategy", 5),  # continues on half the processes, stops at epoch 3's end
    (("--trainer.strategy", "ddp", "--trainer.devices", "2"), 2, "DDPStrategy", 7),  # continues it unsharded
    ((), 1, "SingleDeviceStrategy", 9),  # stops in the middle of epoch 5
    (FSDP2, 2, "FSDP2Strategy", None),  # continues epoch 5 on two processes, to the end
]
# A run continued in the middle of an epoch on another number of processes cannot take over each rank's running
# epoch aggregates (trainrig/resume/epoch_metrics.py warns): epoch 5's train/epoch_loss covers its second step only.
ACROSS_WORLD_SIZES = 4


def checkpoint_of(log_dir) -> dict:
    (last,) = log_dir.rglob("last.ckpt")
    return consolidated(last) if last.is_dir() else torch.load(last, map_location="cpu", weights_only=False)


@pytest.mark.slow  # six runs, one of four processes: over two minutes on two busy cores
def test_a_run_continues_from_4_to_2_fsdp2_processes_then_ddp_one_device_and_fsdp2_as_uninterrupted(
    tmp_path, shapes_root
):
    settings = {
        processes: write_mlp_settings(tmp_path, shapes_root, EPOCHS, batch_size=GLOBAL_BATCH // processes)
        for processes in (1, 2, 4)
    }
    uninterrupted = tmp_path / "uninterrupted"
    run_ok("fit", mlp_args(settings[2], uninterrupted, *FSDP2))

    legs = tmp_path / "legs"
    resumed_at = 0
    for strategy, processes, recorded, stop in LEGS:
        place = f"{recorded} x{processes}"
        resume = ("--ckpt_path", "last") if resumed_at else ()
        stopping = fault(stop, "SIGTERM") if stop is not None else ()
        code, output = run_processes("fit", mlp_args(settings[processes], legs, *strategy, *resume, *stopping))
        assert code == (143 if stop is not None else 0), f"{place}: {output[-3000:]}"
        assert not resumed_at or f"(step {resumed_at})" in output, f"{place}: {output[-3000:]}"
        assert_ran_as(legs, strategy=recorded, processes=processes)
        saved = checkpoint_of(legs)
        resumed_at = saved["global_step"]
        expected = stopped_at(stop, processes, STEPS_PER_EPOCH) if stop is not None else EPOCHS * STEPS_PER_EPOCH
        assert resumed_at == expected, place
        (order,) = saved["loops"]["fit_loop"]["state_dict"]["combined_loader"]  # the resumable loader's position
        position = order["epoch"] * order["dataset_size"] + order["consumed"]
        assert position == resumed_at * GLOBAL_BATCH, f"{place}: the data position, {order}"

    steps = [int(row["step"]) for row in read_metrics(legs) if row.get("train/loss")]
    assert steps == list(range(EPOCHS * STEPS_PER_EPOCH)), "every step logged once, none repeated or lost"
    mine, theirs = (logged(run, "train/epoch_loss") for run in (legs, uninterrupted))
    assert len(mine) == len(theirs) == EPOCHS, f"{mine} vs {theirs}"
    worst = max(abs(a - b) for epoch, (a, b) in enumerate(zip(mine, theirs)) if epoch != ACROSS_WORLD_SIZES)
    assert worst <= TOLERANCE, f"train/epoch_loss differs by {worst}: {mine} vs {theirs}"
    assert_same_losses(legs, uninterrupted, "val/loss")
    final, reference = checkpoint_of(legs), consolidated(sharded_checkpoint(uninterrupted))
    assert largest_difference(final["state_dict"], reference["state_dict"]) <= TOLERANCE
    momentum = [optimizer_tensors(checkpoint["optimizer_states"][0]) for checkpoint in (final, reference)]
    assert largest_difference(*momentum) <= TOLERANCE, "the momentum buffers came along"
