"""Optimizer and learning-rate scheduler chosen in YAML, shared by every LightningModule here."""

import torch
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch.optim.lr_scheduler import CyclicLR, OneCycleLR, ReduceLROnPlateau

from trainrig.errors import UserInputError, one_line

PER_STEP_SCHEDULERS = (OneCycleLR, CyclicLR)
OPTIMIZER_OPTIONS = "--model.init_args.optimizer.init_args"


def configure_optimization(
    module, optimizer: OptimizerCallable, scheduler: LRSchedulerCallable | None, monitor: str = "val/loss"
):
    """Build what `configure_optimizers` returns.

    Cyclic schedules step every batch, the rest every epoch; ReduceLROnPlateau watches
    `monitor`. A OneCycleLR given without `total_steps` or `epochs` gets the trainer's
    estimated number of optimizer steps, so the YAML need not know the dataset size.
    """
    built_optimizer = _build_optimizer(module, optimizer)
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


def check_optimizer(optimizer: OptimizerCallable) -> None:
    """Build the configured optimizer over a placeholder parameter, so that a setting torch rejects refuses the model
    when it is configured, before the run prints or writes anything. The placeholder is zeros: drawing from the
    random generator would change the weights the model initialises next."""
    placeholder = torch.nn.Module()
    placeholder.register_parameter("weight", torch.nn.Parameter(torch.zeros(1)))
    _build_optimizer(placeholder, optimizer)


def _build_optimizer(module, optimizer: OptimizerCallable):
    """The optimizer over the module's parameters; a setting torch rejects is the user's, so one line names it.

    The optimizer is a torch class whose arguments the CLI cannot constrain: torch checks them when it is built.
    """
    lr = getattr(optimizer, "keywords", {}).get("lr")
    if isinstance(lr, (int, float)) and lr < 0:
        raise UserInputError(f"{OPTIMIZER_OPTIONS}.lr must be >= 0, got {lr}")
    try:
        return optimizer(module.parameters())
    except (ValueError, TypeError) as error:  # torch's own checks: "Invalid epsilon value: -1.0", a wrong type
        raise UserInputError(f"invalid optimizer setting ({one_line(error)}); fix {OPTIMIZER_OPTIONS}.*") from error
