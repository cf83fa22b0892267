"""Logs `train/epoch` as a fraction (epoch + batch/batches per epoch), as the reference tutorials' dashboards plot
it."""

from lightning.pytorch import Callback
from typing_extensions import override

from trainrig.monitoring.log_steps import is_log_step


class EpochProgress(Callback):
    @override
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        """Only at the steps the loggers write (`log_every_n_steps`), as LearningRateMonitor does: a value logged at
        any other step is dropped, and each `log` call costs Lightning's bookkeeping whether it is written or not."""
        if not is_log_step(trainer):
            return
        batches = trainer.num_training_batches
        if batches and batches != float("inf"):
            pl_module.log("train/epoch", trainer.current_epoch + batch_idx / batches, on_step=True, on_epoch=False)
