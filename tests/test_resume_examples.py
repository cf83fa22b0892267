"""Each example, as configured (loader workers, augmentation, its own data order), resumes bit for bit after SIGTERM.

tests/test_resume.py covers strategies, launchers and faults on one small model; this covers every example's own
data pipeline on one device: 2 epochs of 3 steps, stopped by SIGTERM after step 4, in the middle of epoch 2.
"""

import pytest
import torch

from tests.helpers.runs import EXAMPLE_CONFIGS, small_run_args
from tests.helpers.strategy_runs import run_processes

PREEMPTED = 143
SIGTERM_AT_STEP_4 = [
    "--trainer.callbacks+=tests.helpers.faults.SignalAtStep",
    "--trainer.callbacks.init_args.step=4",
    "--trainer.callbacks.init_args.signal_name=SIGTERM",
]


def fit(config: str, log_dir, shapes_root, *extra: str) -> int:
    args = small_run_args(config, log_dir, shapes_root, "--trainer.max_epochs", "2", "--trainer.deterministic", "true")
    code, output = run_processes("fit", [*args, "--trainer.num_sanity_val_steps", "0", *extra])
    assert code in (0, PREEMPTED), output[-3000:]
    return code


def final_weights(log_dir) -> dict[str, torch.Tensor]:
    (path,) = log_dir.rglob("last.ckpt")
    checkpoint = torch.load(path, map_location="cpu", weights_only=False)
    assert checkpoint["global_step"] == 6
    return checkpoint["state_dict"]


@pytest.mark.parametrize("config", EXAMPLE_CONFIGS)
def test_example_resumes_mid_epoch_to_the_uninterrupted_weights(config, tmp_path, shapes_root):
    assert fit(config, tmp_path / "uninterrupted", shapes_root) == 0
    assert fit(config, tmp_path / "stopped", shapes_root, *SIGTERM_AT_STEP_4) == PREEMPTED
    assert fit(config, tmp_path / "stopped", shapes_root, "--ckpt_path", "last") == 0
    assert len(list((tmp_path / "stopped").rglob("metrics.csv"))) == 1  # the resumed run continued the stopped one
    uninterrupted, resumed = final_weights(tmp_path / "uninterrupted"), final_weights(tmp_path / "stopped")
    different = [name for name in uninterrupted if not torch.equal(uninterrupted[name], resumed[name])]
    assert not different, f"{config}: {different} differ after resuming"
