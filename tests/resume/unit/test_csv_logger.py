"""The template's CSV logger writes its rows every `flush_logs_every_n_steps` steps, though Lightning asks it to save
after every row, and at once at every checkpoint and at the run's end."""

from pathlib import Path

import pytest
from lightning.pytorch import Callback, Trainer
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.demos.boring_classes import BoringModel
from lightning.pytorch.loggers import CSVLogger
from typing_extensions import override

from trainrig.resume.csv_logger import ContinuingCSVLogger, metrics_rows

STEPS = 12


class LogsItsLoss(BoringModel):
    @override
    def training_step(self, batch, batch_idx):
        output = super().training_step(batch, batch_idx)
        self.log("train/loss", output["loss"])
        return output


class RowsInTheFile(Callback):
    """The rows metrics.csv holds as each training step starts."""

    def __init__(self) -> None:
        self.rows: list[int] = []

    @override
    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self.rows.append(metrics_rows(Path(trainer.logger.experiment.metrics_file_path)))


def rows_as_steps_start(tmp_path, logger, *callbacks) -> tuple[list[int], int]:
    """The rows in the file as each step started, and at the end, of a run logging at every step."""
    record = RowsInTheFile()
    trainer = Trainer(
        default_root_dir=tmp_path,
        max_steps=STEPS,
        log_every_n_steps=1,
        logger=logger,
        callbacks=[record, *callbacks],
        enable_checkpointing=bool(callbacks),
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
    )
    trainer.fit(LogsItsLoss())
    return record.rows, metrics_rows(Path(logger.experiment.metrics_file_path))


@pytest.mark.parametrize("interval", [1, 4])
def test_rows_reach_the_file_every_flush_interval_and_all_of_them_at_the_end(tmp_path, interval):
    logger = ContinuingCSVLogger(tmp_path, name="run", flush_logs_every_n_steps=interval)
    rows, at_the_end = rows_as_steps_start(tmp_path, logger)
    # A row a step: the rows are written once `interval` steps' rows wait, the last ones at the end.
    assert rows == [interval * (step // interval) for step in range(STEPS)]
    assert at_the_end == STEPS


def test_lightnings_own_csv_logger_writes_at_every_log_step(tmp_path):
    """What the interval saves: Lightning's logger connector saves after every row it logs."""
    rows, at_the_end = rows_as_steps_start(tmp_path, CSVLogger(tmp_path, name="run", flush_logs_every_n_steps=4))
    assert rows[1:] == list(range(1, STEPS)) and at_the_end == STEPS


def test_a_checkpoint_writes_the_rows_at_once(tmp_path):
    logger = ContinuingCSVLogger(tmp_path, name="run", flush_logs_every_n_steps=100)
    every_third_step = ModelCheckpoint(dirpath=tmp_path / "checkpoints", every_n_train_steps=3)
    rows, at_the_end = rows_as_steps_start(tmp_path, logger, every_third_step)
    # The checkpoint after step 3 (index 2) writes the rows before it, and its own step's row once Lightning logs it.
    assert rows == [3 * (step // 3) for step in range(STEPS)]
    assert at_the_end == STEPS
