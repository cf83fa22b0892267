"""What `cli.py predict` wrote for an image classifier, and the images it should have classified (a datamodule of the
image examples, built from the run's saved config: this module names none, so every project keeps it)."""

import csv
import importlib
import os
from pathlib import Path

import yaml
from lightning.pytorch import LightningDataModule


def read_predictions(log_dir: Path) -> tuple[list[dict[str, str]], LightningDataModule]:
    """The rows of the run's predictions.csv, and the datamodule its saved config builds, set up for predict."""
    (predictions_file,) = log_dir.rglob("predictions.csv")
    with predictions_file.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    data = yaml.safe_load((predictions_file.parent / "config.yaml").read_text())["data"]
    module_name, class_name = data["class_path"].rsplit(".", 1)
    datamodule = getattr(importlib.import_module(module_name), class_name)(**data["init_args"])
    datamodule.prepare_data()
    datamodule.setup("predict")
    return rows, datamodule


def held_out_files(datamodule: LightningDataModule) -> set[str]:
    """Every image file under the folder that the training split does not hold, relative to the folder."""
    every_file = {path.relative_to(datamodule.image_root).as_posix() for path in datamodule.image_root.rglob("*.png")}
    train = datamodule.train_set
    trained_on = {os.path.relpath(train.dataset.samples[i][0], datamodule.image_root) for i in train.indices}
    return every_file - trained_on
