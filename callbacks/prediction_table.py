"""Logs (image, true label, predicted label, confidence) rows from the final training epoch as a versioned table.

Rows are collected in every epoch (they hold a few batches' images, copied off the GPU) so
that whichever epoch turns out to be the last one, also under early stopping or `max_steps`,
has them; the table and its artifact are written once, when fitting ends, as the reference
does after its training loop, so no epoch waits for image encoding.
"""

import torch
from lightning.pytorch import Callback

from trainrig.loggers.media import log_table


class PredictionTable(Callback):
    def __init__(self, every_n_batches: int = 4, max_rows: int = 200):
        """
        Args:
            every_n_batches: take the rows of every N-th batch of the epoch (the reference uses 4).
            max_rows: stop collecting after this many rows.
        """
        self.every_n_batches = every_n_batches
        self.max_rows = max_rows
        self.rows: list[list] = []

    def state_dict(self) -> dict:
        """The epoch's rows so far go into checkpoints: a run resumed mid-epoch logs the table it would have."""
        return {"rows": self.rows}

    def load_state_dict(self, state_dict: dict) -> None:
        self.rows = state_dict.get("rows", [])

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        self.rows = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if not (trainer.is_global_zero and batch_idx % self.every_n_batches == 0 and len(self.rows) < self.max_rows):
            return
        images, labels = batch
        confidence, predicted = torch.softmax(outputs["logits"].float(), dim=-1).max(dim=-1)
        class_names = getattr(trainer.datamodule, "class_names", None)
        for image, label, guess, probability in zip(
            images.cpu(), labels.tolist(), predicted.tolist(), confidence.tolist()
        ):
            if len(self.rows) >= self.max_rows:
                return
            name = class_names[label] if class_names else label
            guessed = class_names[guess] if class_names else guess
            self.rows.append([image, name, guessed, round(probability, 4)])

    def on_fit_end(self, trainer, pl_module) -> None:
        if self.rows and trainer.is_global_zero:
            log_table(
                trainer,
                "train_predictions",
                ["image", "label", "prediction", "confidence"],
                self.rows,
                artifact_type="train_predictions",
            )
            self.rows = []
