"""Saves the resolved config next to the logs (LightningCLI's default) and hands it to loggers that keep a run config."""

from lightning.pytorch.cli import SaveConfigCallback
from lightning.pytorch.loggers import WandbLogger  # cookiecutter: only with wandb


class SaveConfigToLoggers(SaveConfigCallback):
    def save_config(self, trainer, pl_module, stage: str) -> None:
        super().save_config(trainer, pl_module, stage)
        # cookiecutter: only with wandb
        for logger in trainer.loggers:
            if isinstance(logger, WandbLogger):
                logger.experiment.config.update(self.config.as_dict(), allow_val_change=True)
        # cookiecutter: end
