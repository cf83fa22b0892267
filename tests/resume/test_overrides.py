"""A resumed run whose config sets another optimizer or scheduler value than the checkpoint's state says, in one line
per value, that the checkpoint's value replaces it; the same config resumed says nothing."""

import re

import torch

from tests.helpers.runs import EXAMPLE_CONFIGS, run_cli, small_run_args

REPLACED = re.compile(r"^resume: (.+) from the config is replaced by the checkpoint's (.+)$", re.M)
STEP_LR = [
    "--model.init_args.scheduler",
    "torch.optim.lr_scheduler.StepLR",
    "--model.init_args.scheduler.init_args.step_size",
]


def fit(tmp_path, shapes_root, capsys, epochs: int, *extra: str) -> list[tuple[str, str]]:
    """One more epoch of the run in `tmp_path`, a StepLR halving the learning rate after every epoch unless `extra`
    changes it; the (setting, checkpoint's value) lines it printed."""
    args = small_run_args(EXAMPLE_CONFIGS[-1], tmp_path, shapes_root, "--trainer.max_epochs", str(epochs))
    args += [*STEP_LR, "1", "--model.init_args.scheduler.init_args.gamma", "0.5"]
    args += ["--trainer.limit_train_batches", "2", "--trainer.limit_val_batches", "1"]
    run_cli("fit", [*args, *(["--ckpt_path", "last"] if epochs > 1 else []), *extra])
    return REPLACED.findall(capsys.readouterr().err)


def checkpoint_lr(tmp_path) -> float:
    (path,) = tmp_path.rglob("last.ckpt")
    return torch.load(path, map_location="cpu", weights_only=False)["optimizer_states"][0]["param_groups"][0]["lr"]


def test_resumed_run_names_each_config_value_the_checkpoint_replaces(tmp_path, shapes_root, capsys):
    assert fit(tmp_path, shapes_root, capsys, 1) == []
    configured_lr = float(re.search(r"lr: ([\d.e-]+)", (tmp_path.rglob("config.yaml").__next__()).read_text())[1])

    assert fit(tmp_path, shapes_root, capsys, 2) == [], "the same config: the scheduled lr is no replaced setting"
    scheduled_lr = checkpoint_lr(tmp_path)
    assert scheduled_lr == configured_lr * 0.5**2

    lr_flag = ["--model.init_args.optimizer.init_args.lr", "0.5"]
    assert fit(tmp_path, shapes_root, capsys, 3, *lr_flag) == [("optimizer 0 lr 0.5", str(scheduled_lr))]
    assert checkpoint_lr(tmp_path) == configured_lr * 0.5**3, "trained at the checkpoint's learning rate"
    assert fit(tmp_path, shapes_root, capsys, 4, *lr_flag) == [("optimizer 0 lr 0.5", str(configured_lr * 0.5**3))], (
        "a resumed run keeps the settings it was replaced with: the flag is still overridden"
    )

    step_size = [*STEP_LR, "3"]
    assert fit(tmp_path, shapes_root, capsys, 5, *step_size) == [("scheduler 0 step_size 3", "1")]
