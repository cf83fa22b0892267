"""Saves the resolved config in the run's folder (LightningCLI's default puts it in `trainer.log_dir`) and hands it to
loggers that keep a run config."""

from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.cli import SaveConfigCallback
from typing_extensions import override

from trainrig.registry import logger_extension
from trainrig.resume.run_directory import config_file_to_write, run_directory


class SaveConfigToLoggers(SaveConfigCallback):
    """A run's config goes into its own folder, for every logger (some loggers' `trainer.log_dir` is the folder all
    their runs share). A run resumed with the command it started with writes nothing: its config is there already;
    a resumed run with another command adds `config.resumed-K.yaml` and never replaces the first config.

    The config is written once the run has really started: its model, data and checkpoint (weights, optimizer and
    scheduler state) accepted, at the first of the train, validation, test or predict start. A run refused before
    then leaves no config, and a refused resume adds none to the run it tried to continue.
    """

    @override
    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        """LightningCLI's callback saves here, before the checkpoint is restored; this one saves once it is."""

    @override
    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._save_once(trainer, pl_module, "fit")

    @override
    def on_validation_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._save_once(trainer, pl_module, trainer.state.fn.value)

    @override
    def on_test_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._save_once(trainer, pl_module, "test")

    @override
    def on_predict_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._save_once(trainer, pl_module, "predict")

    def _save_once(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        if self.already_saved:
            return
        if self.save_to_log_dir and trainer.is_global_zero:
            run_dir = run_directory(trainer)
            config_text = self.parser.dump(self.config, skip_none=False)
            name = config_file_to_write(run_dir, config_text, self.config_filename)
            if name is not None:
                run_dir.mkdir(parents=True, exist_ok=True)
                (run_dir / name).write_text(config_text)
        if trainer.is_global_zero:
            self.save_config(trainer, pl_module, stage)
            self.already_saved = True
        # Every rank agrees that the config is saved, so that a later stage does not save it again.
        self.already_saved = trainer.strategy.broadcast(self.already_saved)

    @override
    def save_config(self, trainer, pl_module, stage: str) -> None:
        """Loggers that keep a run config get the resolved one."""
        for logger in trainer.loggers:
            if (save := getattr(logger_extension(logger), "save_config", None)) is not None:
                save(logger, self.config.as_dict())
