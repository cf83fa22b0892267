"""Logs (image, true label, predicted label, confidence) rows from the final training epoch as a versioned table.

Rows are collected in every epoch so that whichever epoch turns out to be the last one, also under early stopping or
`max_steps`, has them; the table and its artifact are written once, when fitting ends, as the reference does after
its training loop, so no epoch waits for image encoding. The batches taken stay where they are (a copy on the GPU)
until a checkpoint or the table needs them as rows: a training step never waits for a copy to the host.
"""

import torch
from lightning.pytorch import Callback
from typing_extensions import override

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
        self._taken: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []  # (images, labels, logits)
        self._class_names: list[str] | None = None

    @override
    def state_dict(self) -> dict:
        """The epoch's rows so far go into checkpoints: a run resumed mid-epoch logs the table it would have."""
        return {"rows": self._all_rows()}

    @override
    def load_state_dict(self, state_dict: dict) -> None:
        self.rows, self._taken = state_dict.get("rows", []), []

    @override
    def on_train_epoch_start(self, trainer, pl_module) -> None:
        self.rows, self._taken = [], []
        self._class_names = getattr(trainer.datamodule, "class_names", None)

    @override
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        room = self.max_rows - len(self.rows) - sum(len(labels) for _, labels, _ in self._taken)
        if not (trainer.is_global_zero and batch_idx % self.every_n_batches == 0 and room > 0):
            return
        images, labels = batch
        self._taken.append((images[:room].clone(), labels[:room].clone(), outputs["logits"][:room].detach().clone()))

    @override
    def on_fit_end(self, trainer, pl_module) -> None:
        rows = self._all_rows()
        if rows and trainer.is_global_zero:
            log_table(
                trainer,
                "train_predictions",
                ["image", "label", "prediction", "confidence"],
                rows,
                artifact_type="train_predictions",
            )
        self.rows, self._taken = [], []

    def _all_rows(self) -> list[list]:
        """The rows so far, the batches taken turned into rows (copied to the host) first."""
        for images, labels, logits in self._taken:
            confidence, predicted = torch.softmax(logits.float(), dim=-1).max(dim=-1)
            for image, label, guess, probability in zip(
                images.cpu(), labels.tolist(), predicted.tolist(), confidence.tolist()
            ):
                name = self._class_names[label] if self._class_names else label
                guessed = self._class_names[guess] if self._class_names else guess
                self.rows.append([image, name, guessed, round(probability, 4)])
        self._taken = []
        return self.rows
