"""Saves the resolved config next to the logs (LightningCLI's default) and hands it to loggers that keep a run
config."""

from pathlib import Path

from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.cli import SaveConfigCallback
from lightning.pytorch.loggers import WandbLogger  # cookiecutter: only with wandb
from typing_extensions import override


class SaveConfigToLoggers(SaveConfigCallback):
    @override
    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        """A resumed run continues in its run's directory: its config goes next to the first one, never over it."""
        if self.save_to_log_dir and not self.already_saved:
            log_dir = Path(trainer.log_dir)  # a collective: every rank asks
            name = unused_config_name(log_dir, self.config_filename) if trainer.is_global_zero else None
            self.config_filename = trainer.strategy.broadcast(name)
        super().setup(trainer, pl_module, stage)

    @override
    def save_config(self, trainer, pl_module, stage: str) -> None:
        super().save_config(trainer, pl_module, stage)
        # cookiecutter: only with wandb
        for logger in trainer.loggers:
            if isinstance(logger, WandbLogger):
                logger.experiment.config.update(self.config.as_dict(), allow_val_change=True)
        # cookiecutter: end


def unused_config_name(log_dir: Path, filename: str) -> str:
    """`config.yaml`, or `config.resumed-K.yaml` for the K-th resumption of the same run."""
    path = Path(filename)
    resumption = 0
    while (log_dir / filename).exists():
        resumption += 1
        filename = f"{path.stem}.resumed-{resumption}{path.suffix}"
    return filename
