"""Logs the validation confusion matrix (rows: true class, columns: predicted) when training ends."""

from lightning.pytorch import Callback
from torchmetrics.classification import MulticlassConfusionMatrix

from trainrig.loggers.media import log_table


class ConfusionMatrix(Callback):
    def __init__(self) -> None:
        self.latest = None

    def setup(self, trainer, pl_module, stage: str) -> None:
        # No checks of each batch's values (they would copy them to the host, waiting for the GPU at every batch):
        # the model's logits and the data's labels, which the module's own metrics check on the same batch.
        self.matrix = MulticlassConfusionMatrix(pl_module.num_classes, validate_args=False)

    def on_validation_epoch_start(self, trainer, pl_module) -> None:
        self.matrix = self.matrix.to(pl_module.device)
        self.matrix.reset()

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
        self.matrix.update(outputs["logits"], batch[1])

    def on_validation_epoch_end(self, trainer, pl_module) -> None:
        if not trainer.sanity_checking:
            self.latest = self.matrix.compute().cpu()  # every rank: compute() sums the ranks' counts

    def state_dict(self) -> dict:
        """The latest matrix goes into checkpoints: a run resumed after its last validation still logs it."""
        return {"latest": self.latest}

    def load_state_dict(self, state_dict: dict) -> None:
        self.latest = state_dict.get("latest")

    def on_fit_end(self, trainer, pl_module) -> None:
        if self.latest is None or not trainer.is_global_zero:
            return
        names = list(getattr(trainer.datamodule, "class_names", range(len(self.latest))))
        rows = [[str(name), *counts] for name, counts in zip(names, self.latest.tolist())]
        log_table(trainer, "val/confusion_matrix", ["true \\ predicted", *map(str, names)], rows)
