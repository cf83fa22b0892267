"""`ResumableCheckpoint(train_time_interval=...)` saves `last.ckpt` within epochs when a rank's clock passes the
interval, every rank at the same step, with no collective that each step waits for (trainrig/resume/preemption.py).
"""

import torch

from tests.helpers.mlp import tiny_mlp
from tests.helpers.strategy_runs import run_processes

EVERY_STEP = {
    "class_path": "trainrig.resume.checkpoint.ResumableCheckpoint",
    "init_args": {"train_time_interval": "0:00:00"},
}


def test_an_interval_passed_saves_mid_epoch_at_the_same_step_on_every_rank(tmp_path, shapes_root):
    """An interval of 0 has passed at every step: under 2-process DDP (4 steps an epoch) the ranks agree on a save
    at steps 2 and 3 (the flags of steps 1 and 2), none at the epoch's last step, which the epoch's end saves. A
    save the ranks disagreed on would wait for ever in the checkpoint's barrier."""
    settings = tiny_mlp.write_settings(
        tmp_path / "settings.yaml", shapes_root, epochs=1, batch_size=8, images_per_class=16, callbacks=[EVERY_STEP]
    )
    args = [*tiny_mlp.mlp_args(settings, tmp_path), "--trainer.strategy", "ddp", "--trainer.devices", "2"]
    code, output = run_processes("fit", args, timeout=180)
    assert code == 0, output[-3000:]
    (checkpoints,) = tmp_path.rglob("checkpoints")
    steps = {
        name: torch.load(checkpoints / name, map_location="cpu", weights_only=False)["global_step"]
        for name in ("last.ckpt", "previous.ckpt")
    }
    assert steps == {"last.ckpt": 4, "previous.ckpt": 3}, "the save before the epoch's end was the interval's"
