"""Writes what `cli.py predict` classified to a CSV file, one row per image in the data set's order, from global
rank 0 only.

Each rank predicts its share of the images; the rows are gathered on rank 0 by data set index, keeping one row per
image, so the file is the same for any number of processes and also when every rank saw every image (strategies
that feed all ranks the same batches).
"""

import csv
from pathlib import Path

from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.callbacks import BasePredictionWriter
from typing_extensions import override

from trainrig.loggers.gathered_predictions import predictions_by_index

COLUMNS = ["image", "label", "class_id", "class_name", "probability"]


def _class_and_probability(batch: dict) -> list[tuple[int, float]]:
    """One (class id, its probability) per image of a batch `predict_step` returned."""
    return [(int(class_id), float(row[class_id])) for class_id, row in zip(batch["class_id"], batch["probabilities"])]


class PredictedClassesWriter(BasePredictionWriter):
    def __init__(self, output_file: str | None = None):
        """
        Args:
            output_file: where to write; by default `predictions.csv` in the run's log directory,
                so a new prediction never overwrites an earlier one.
        """
        super().__init__(write_interval="epoch")
        self.output_file = output_file

    @override
    def write_on_epoch_end(self, trainer: Trainer, pl_module: LightningModule, predictions, batch_indices) -> None:
        rows = predictions_by_index(trainer, predictions, batch_indices, items=_class_and_probability)
        output_file = Path(self.output_file or Path(trainer.log_dir) / "predictions.csv")  # every rank: collective
        if trainer.is_global_zero:
            self._write(output_file, rows, trainer.datamodule)

    @staticmethod
    def _write(output_file: Path, rows: dict[int, tuple[int, float]], datamodule) -> None:
        class_names = datamodule.class_names
        output_file.parent.mkdir(parents=True, exist_ok=True)
        with output_file.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(COLUMNS)
            for index in sorted(rows):
                class_id, probability = rows[index]
                image, label = datamodule.predict_sample(index)
                true_name = class_names[label] if label is not None else ""
                writer.writerow([image, true_name, class_id, class_names[class_id], f"{probability:.6f}"])
        print(f"wrote {len(rows)} predictions to {output_file}")
