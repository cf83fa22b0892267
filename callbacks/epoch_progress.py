"""Logs `train/epoch` as a fraction (epoch + batch/batches per epoch), as the reference tutorials' dashboards plot
it."""

from lightning.pytorch import Callback


class EpochProgress(Callback):
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        batches = trainer.num_training_batches
        if batches and batches != float("inf"):
            pl_module.log("train/epoch", trainer.current_epoch + batch_idx / batches, on_step=True, on_epoch=False)
