"""Optimizer and learning-rate scheduler chosen in YAML, shared by every LightningModule here."""

from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch.optim.lr_scheduler import CyclicLR, OneCycleLR, ReduceLROnPlateau

PER_STEP_SCHEDULERS = (OneCycleLR, CyclicLR)


def configure_optimization(
    module, optimizer: OptimizerCallable, scheduler: LRSchedulerCallable | None, monitor: str = "val/loss"
):
    """Build what `configure_optimizers` returns.

    Cyclic schedules step every batch, the rest every epoch; ReduceLROnPlateau watches
    `monitor`. A OneCycleLR given without `total_steps` or `epochs` gets the trainer's
    estimated number of optimizer steps, so the YAML need not know the dataset size.
    """
    built_optimizer = optimizer(module.parameters())
    if scheduler is None:
        return built_optimizer
    settings = getattr(scheduler, "keywords", {})
    extra = {}
    if "total_steps" in settings and settings["total_steps"] is None and settings.get("epochs") is None:
        extra["total_steps"] = int(module.trainer.estimated_stepping_batches)
    built_scheduler = scheduler(built_optimizer, **extra)
    schedule = {
        "scheduler": built_scheduler,
        "interval": "step" if isinstance(built_scheduler, PER_STEP_SCHEDULERS) else "epoch",
    }
    if isinstance(built_scheduler, ReduceLROnPlateau):
        schedule["monitor"] = monitor
    return {"optimizer": built_optimizer, "lr_scheduler": schedule}
