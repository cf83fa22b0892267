"""Says which optimizer and LR-scheduler settings of the config a resumed run's checkpoint replaces.

Loading a checkpoint restores the optimizers' and schedulers' state, and their hyper-parameters with it: a run
resumed with `--model.init_args.optimizer.init_args.lr 0.5` trains at the checkpoint's learning rate. Lightning
does so silently; this prints one line per replaced value, on rank 0.
"""

import inspect
from typing import Any

import torch
from lightning.pytorch import Callback, LightningModule, Trainer
from typing_extensions import override

from trainrig.resume.latest import say

__all__ = ["ReplacedSettings"]

CHECKPOINT_KEY = "configured_settings"
# A scheduler's constructor arguments that count progress rather than configure it.
PROGRESS_ARGUMENTS = {"optimizer", "last_epoch", "verbose"}


class ReplacedSettings(Callback):
    """Compares the settings the config gives the optimizers and schedulers with those the checkpoint restores.

    The config's settings are read in `on_fit_start`, when the optimizers exist and before Lightning restores their
    state (after `on_load_checkpoint` for most strategies, before it for those restoring after set-up); both are
    compared in `on_train_start`. A checkpoint keeps the settings its run was configured with, not the current
    learning rate, which a scheduler changes as it goes: the same config resumed says nothing. A resumed run keeps
    the settings of the checkpoint it continues, which are the ones it trains with.
    """

    def __init__(self) -> None:
        self._configured: dict[str, Any] | None = None  # what this run's optimizers and schedulers train with
        self._from_config: dict[str, Any] | None = None
        self._restored: tuple[dict[str, Any], dict[str, Any]] | None = None  # the checkpoint's (configured, state)

    @override
    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._from_config = self._configured = configured_settings(trainer)

    @override
    def on_load_checkpoint(self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict) -> None:
        configured = checkpoint.get(CHECKPOINT_KEY) or restored_settings(checkpoint, configured=True)
        self._restored = (configured, restored_settings(checkpoint, configured=False))

    @override
    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        restored, self._restored = self._restored, None
        if restored is None or self._from_config is None:
            return
        configured, state = restored
        for name, value in self._from_config.items():
            if name in configured and configured[name] != value:
                replacement = state.get(name, configured[name])
                say(f"{name} {value} from the config is replaced by the checkpoint's {replacement}")
        self._configured = configured

    @override
    def on_save_checkpoint(self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict) -> None:
        if self._configured is not None:
            checkpoint[CHECKPOINT_KEY] = self._configured


def configured_settings(trainer: Trainer) -> dict[str, Any]:
    """`optimizer I [group J] NAME` and `scheduler I NAME` -> value, as the trainer's objects hold them now."""
    settings = {}
    for index, optimizer in enumerate(trainer.optimizers):
        settings |= _group_settings(index, optimizer.param_groups, configured=True)
    for index, config in enumerate(trainer.lr_scheduler_configs):
        arguments = set(inspect.signature(type(config.scheduler)).parameters)
        settings |= _scheduler_settings(index, config.scheduler.state_dict(), arguments)
    return settings


def restored_settings(checkpoint: dict, configured: bool) -> dict[str, Any]:
    """The same names -> the values loading `checkpoint` gives the optimizers and schedulers; `configured`: with the
    learning rate the schedulers started from rather than the current one."""
    settings = {}
    for index, state in enumerate(checkpoint.get("optimizer_states") or []):
        if isinstance(state, dict) and isinstance(state.get("param_groups"), list):
            settings |= _group_settings(index, state["param_groups"], configured)
    for index, state in enumerate(checkpoint.get("lr_schedulers") or []):
        if isinstance(state, dict):
            settings |= _scheduler_settings(index, state, set(state))
    return settings


def _group_settings(index: int, groups: list[dict], configured: bool) -> dict[str, Any]:
    """Every hyper-parameter of every parameter group. A scheduler keeps the configured learning rate as
    `initial_lr` and changes `lr` as it goes: with `configured`, the learning rate is `initial_lr` where it exists."""
    settings = {}
    for group_index, group in enumerate(groups):
        where = f"optimizer {index}" + (f" group {group_index}" if len(groups) > 1 else "")
        for name, value in group.items():
            if name == "lr" and configured and "initial_lr" in group:
                value = group["initial_lr"]
            if name not in ("params", "initial_lr") and (value := _plain(value)) is not None:
                settings[f"{where} {name}"] = value
    return settings


def _scheduler_settings(index: int, state: dict, arguments: set[str]) -> dict[str, Any]:
    """The entries of a scheduler's state named like its constructor's `arguments`, progress counters left out."""
    return {
        f"scheduler {index} {name}": value
        for name in sorted((arguments - PROGRESS_ARGUMENTS) & set(state))
        if (value := _plain(state[name])) is not None
    }


def _plain(value: Any) -> Any:
    """`value` as a number, string, bool or tuple/list of them; None for anything else (state, not a setting)."""
    if isinstance(value, torch.Tensor):
        return value.item() if value.numel() == 1 else None
    if isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(item, (bool, int, float, str)) for item in value):
        return value
    return None
