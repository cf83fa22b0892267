"""Every rank's running epoch aggregates in the checkpoint, so that an epoch stopped in the middle logs the values
(`train/acc`, `train/epoch_loss`, ...) of the whole epoch once resumed, not of the steps after the resume.

Lightning keeps them in memory only: the states of torchmetrics objects (not in the module's `state_dict`) and its
own accumulators of tensors logged with `on_epoch=True`.
"""

import torch
from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.utilities import rank_zero_warn
from torchmetrics import Metric
from typing_extensions import override

from trainrig.resume.random_state import gathered_from_every_rank

__all__ = ["EpochMetrics"]

CHECKPOINT_KEY = "epoch_metrics"


def _metric_objects(pl_module: LightningModule) -> dict[str, Metric]:
    return {name: module for name, module in pl_module.named_modules() if isinstance(module, Metric)}


def _logged_tensors(trainer: Trainer) -> dict:
    """Lightning's accumulators of training-epoch values logged as tensors, by their logging key."""
    results = trainer.fit_loop.epoch_loop._results
    return {key: result for key, result in results.items() if result.is_tensor and result.meta.on_epoch}


class EpochMetrics(Callback):
    """Saves the epoch aggregates of every rank; restores them when training resumes within the same epoch.

    The metric objects get their state back before the first step; Lightning's tensor accumulators exist only once
    a step has logged, so the saved sums are added to them after that first step.
    """

    def __init__(self) -> None:
        self._to_restore: dict | None = None

    @override
    def on_save_checkpoint(self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict) -> None:
        if not trainer.training:
            return
        local = {
            "metrics": {name: _state_of(metric) for name, metric in _metric_objects(pl_module).items()},
            "logged": {key: dict(result.metric_state) for key, result in _logged_tensors(trainer).items()},
        }
        checkpoint[CHECKPOINT_KEY] = {"epoch": trainer.current_epoch, "ranks": gathered_from_every_rank(trainer, local)}

    @override
    def on_load_checkpoint(self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict) -> None:
        self._to_restore = checkpoint.get(CHECKPOINT_KEY)

    @override
    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        saved = self._to_restore
        if saved is None or saved["epoch"] != trainer.current_epoch:
            self._to_restore = None  # saved at an epoch's end: the new epoch starts from nothing anyway
            return
        if len(saved["ranks"]) != trainer.world_size:
            rank_zero_warn(
                f"the checkpoint holds the epoch metrics of {len(saved['ranks'])} process(es), this run has "
                f"{trainer.world_size}: the resumed epoch's aggregates cover the steps after the resume only"
            )
            self._to_restore = None
            return
        mine = saved["ranks"][trainer.global_rank]
        metrics = _metric_objects(pl_module)
        for name, state in mine["metrics"].items():
            if name in metrics:
                _restore_state(metrics[name], state)
        self._to_restore = mine["logged"]

    @override
    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs, batch, batch_idx: int) -> None:
        logged, self._to_restore = self._to_restore, None
        if not logged:
            return
        results = _logged_tensors(trainer)
        for key, state in logged.items():
            if key in results:
                _add_saved(results[key], state)


def _state_of(metric: Metric) -> dict:
    return {
        "state": {name: _detached(value) for name, value in metric.metric_state.items()},
        "updates": metric._update_count,
    }


def _detached(value):
    if isinstance(value, list):
        return [item.detach().cpu().clone() for item in value]
    return value.detach().cpu().clone()


def _restore_state(metric: Metric, saved: dict) -> None:
    device = metric.device
    for name, value in saved["state"].items():
        setattr(metric, name, [item.to(device) for item in value] if isinstance(value, list) else value.to(device))
    metric._update_count = saved["updates"]
    metric._computed = None


def _add_saved(result, saved: dict) -> None:
    """Fold the steps before the stop into an accumulator that has seen the first step after it."""
    meta = result.meta
    value = saved["value"].to(result.value.device)
    if meta.is_max_reduction:
        result.value = torch.maximum(result.value, value)
    elif meta.is_min_reduction:
        result.value = torch.minimum(result.value, value)
    elif meta.is_mean_reduction or meta.is_sum_reduction:
        result.value = result.value + value
    else:
        rank_zero_warn(f"{meta.name} has a custom reduction: its resumed epoch value covers the steps since the resume")
        return
    if meta.is_mean_reduction:
        result.cumulated_batch_size = result.cumulated_batch_size + saved["cumulated_batch_size"].to(
            result.value.device
        )
