"""Writes the names produced by `cli.py predict` to a text file, title-cased, in the order of their predict items,
from global rank 0 only."""

from pathlib import Path

from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.callbacks import BasePredictionWriter

from datamodules.pet_names import display_name
from trainrig.loggers.gathered_predictions import predictions_by_index


class GeneratedNamesWriter(BasePredictionWriter):
    def __init__(self, output_file: str | None = None):
        """
        Args:
            output_file: where to write; by default `generated_names.txt` in the run's log directory,
                so a new prediction never overwrites an earlier one.
        """
        super().__init__(write_interval="epoch")
        self.output_file = output_file

    def write_on_epoch_end(self, trainer: Trainer, pl_module: LightningModule, predictions, batch_indices) -> None:
        """Names in the order of their predict items, each once, whatever the number of processes."""
        by_index = predictions_by_index(trainer, predictions, batch_indices, items=lambda names: names)
        names = [by_index[index] for index in sorted(by_index)]
        output_file = Path(
            self.output_file or Path(trainer.log_dir) / "generated_names.txt"
        )  # every rank: log_dir is a collective call
        if trainer.is_global_zero:
            output_file.parent.mkdir(parents=True, exist_ok=True)
            output_file.write_text("".join(f"{display_name(name)}\n" for name in names), encoding="utf-8")
            print(f"wrote {len(names)} generated names to {output_file}")
