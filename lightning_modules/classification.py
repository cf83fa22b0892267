"""Shared training logic of the image classifiers: loss, accuracy, confidence, optimizers."""

import torch
from lightning.pytorch import LightningModule
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import nn
from torch.nn import functional as F
from torchmetrics import MeanMetric, MetricCollection
from torchmetrics.classification import MulticlassAccuracy
from typing_extensions import override

from lightning_modules.optimization import check_optimizer, configure_optimization


def _accuracy_metrics(num_classes: int) -> MetricCollection:
    # validate_args=False: the check counts each batch's distinct labels on the host, which makes every training step
    # wait for the GPU; the step's cross-entropy already rejects a label out of range.
    metrics = {"acc": MulticlassAccuracy(num_classes, top_k=1, average="micro", validate_args=False)}
    if num_classes >= 5:
        metrics["acc_top5"] = MulticlassAccuracy(num_classes, top_k=5, average="micro", validate_args=False)
    return MetricCollection(metrics)


class ClassificationModule(LightningModule):
    """Trains `self.network` (set by the subclass) with cross-entropy.

    Logs `train/loss` (per step), `train/epoch_loss` (epoch mean), `train/acc`, `val/loss`, `val/acc`, `val/acc_top5`
    (five or more
    classes), `val/confidence` (mean softmax probability of the predicted class) and the same
    under `test/`. One metric object per stage, so the stages never mix their state. The
    steps return their logits so callbacks (prediction tables, confusion matrix) need not
    run the network again.

    The steps update the metric objects; the epoch-end hooks log them, once. Handed to `self.log` in every step
    instead, each object costs Lightning's bookkeeping at every step (it moves the object to the step's device and
    walks its attributes: about 0.3 ms a metric on a CPU, as much as a small network's own metric update) for the
    same value computed at the epoch's end.
    """

    network: nn.Module

    def __init__(self, num_classes: int, optimizer: OptimizerCallable, scheduler: LRSchedulerCallable | None):
        super().__init__()
        check_optimizer(optimizer)
        self.num_classes = num_classes
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.train_metrics = _accuracy_metrics(num_classes).clone(prefix="train/")
        self.val_metrics = _accuracy_metrics(num_classes).clone(prefix="val/")
        self.test_metrics = _accuracy_metrics(num_classes).clone(prefix="test/")
        # `nan_strategy="disable"`: the default checks each update for NaN on the host, a read that stalls a GPU.
        self.val_confidence = MeanMetric(nan_strategy="disable")
        self.test_confidence = MeanMetric(nan_strategy="disable")

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.network(images)

    def training_step(self, batch, batch_idx):
        images, labels = batch
        logits = self(images)
        loss = F.cross_entropy(logits, labels)
        self.train_metrics.update(logits, labels)
        # Not `prog_bar=True`: Lightning turns a progress-bar value into a Python number at every step, a host read
        # that stalls a GPU; the template's progress bar shows the loss from the steps the loggers write.
        self.log("train/loss", loss, batch_size=len(labels))
        self.log("train/epoch_loss", loss, on_step=False, on_epoch=True, sync_dist=True, batch_size=len(labels))
        return {"loss": loss, "logits": logits.detach()}

    @override
    def on_train_epoch_end(self) -> None:
        self.log_dict(self.train_metrics)

    def validation_step(self, batch, batch_idx):
        return self._evaluate(batch, "val", self.val_metrics, self.val_confidence)

    @override
    def on_validation_epoch_end(self) -> None:
        self._log_evaluation("val", self.val_metrics, self.val_confidence)

    def test_step(self, batch, batch_idx):
        return self._evaluate(batch, "test", self.test_metrics, self.test_confidence)

    @override
    def on_test_epoch_end(self) -> None:
        self._log_evaluation("test", self.test_metrics, self.test_confidence)

    def _evaluate(self, batch, stage: str, metrics: MetricCollection, confidence: MeanMetric) -> dict:
        images, labels = batch
        logits = self(images)
        loss = F.cross_entropy(logits, labels)
        metrics.update(logits, labels)
        confidence.update(logits.softmax(dim=-1).amax(dim=-1))
        self.log(f"{stage}/loss", loss, prog_bar=True, sync_dist=True, batch_size=len(labels))
        return {"logits": logits.detach()}

    def _log_evaluation(self, stage: str, metrics: MetricCollection, confidence: MeanMetric) -> None:
        self.log_dict(metrics, prog_bar=True)
        self.log(f"{stage}/confidence", confidence)

    @override
    def predict_step(self, batch, batch_idx) -> dict[str, torch.Tensor]:
        """The predicted class of each image and every class's probability; labels in the batch are not used.
        Softmax in float32, so a bf16 run's probabilities still sum to one."""
        images = batch[0] if isinstance(batch, (list, tuple)) else batch
        probabilities = self(images).float().softmax(dim=-1)
        return {"class_id": probabilities.argmax(dim=-1), "probabilities": probabilities}

    def configure_optimizers(self):
        return configure_optimization(self, self.optimizer, self.scheduler)
