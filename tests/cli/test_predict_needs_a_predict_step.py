"""`cli.py predict` with a model that has nothing to predict with (no `predict_step`, no `forward`) stops with one
line before it builds anything, not with torch's traceback after the checkpoint is read."""

import torch
from lightning.pytorch import LightningModule

from tests.helpers.runs import EXAMPLE_CONFIGS, small_run_args
from tests.helpers.user_errors import failing_run


class TrainsOnly(LightningModule):
    """A model as a user writes one for `fit` alone: its steps compute the loss from its layer directly."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)

    def training_step(self, batch, batch_idx):
        return self.layer(batch[0]).sum()


def test_predict_with_a_model_without_predict_step_or_forward_is_one_line(tmp_path, capsys):
    model = f"{__name__}.TrainsOnly"
    args = small_run_args(EXAMPLE_CONFIGS[0], tmp_path) + ["--model", model, "--ckpt_path", str(tmp_path / "a.ckpt")]
    error = failing_run(capsys, "predict", args)
    assert error == (
        f"error: --model {model} defines neither predict_step nor forward, so predict has nothing to run: add "
        "`def predict_step(self, batch, batch_idx)` returning the batch's predictions\n"
    )
    assert not any(tmp_path.iterdir())
