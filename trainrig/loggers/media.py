"""Images and tables that callbacks log, written as files into the run's log directory.

Images land as PNG grids and tables as CSV files (image cells as PNG paths) under `<run directory>/media/<key>/`.
A logger that shows media natively gets them instead (through its plugin, trainrig/registry.py), so a user of a
plain logger loses nothing.
"""

import csv
from pathlib import Path

import torch
from lightning.pytorch import Trainer

from trainrig.registry import logger_extension
from trainrig.resume.run_directory import run_directory


def displayable(images: torch.Tensor) -> torch.Tensor:
    """Rescale each normalised image to [0, 1] so it can be looked at."""
    images = images.detach().float().cpu()
    low = images.amin(dim=(1, 2, 3), keepdim=True)
    high = images.amax(dim=(1, 2, 3), keepdim=True)
    return (images - low) / (high - low).clamp_min(1e-8)


def _local_dir(trainer: Trainer, key: str) -> Path:
    # Not trainer.log_dir: it broadcasts, and these helpers run on global rank 0 only (a DDP hang otherwise).
    folder = run_directory(trainer) / "media" / key.replace("/", "_")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _native(trainer: Trainer, function: str) -> list[tuple]:
    """(logger, its extension's `function`) for every logger that shows this kind of media natively."""
    found = [(logger, getattr(logger_extension(logger), function, None)) for logger in trainer.loggers]
    return [(logger, log) for logger, log in found if log is not None]


def log_images(trainer: Trainer, key: str, images: torch.Tensor, caption: str) -> None:
    images = displayable(images)
    native = _native(trainer, "log_images")
    for logger, log in native:
        log(logger, key, images, caption)
    if native:
        return
    from torchvision.utils import save_image

    save_image(images, _local_dir(trainer, key) / f"step{trainer.global_step:06d}.png", nrow=len(images))


def log_table(
    trainer: Trainer, key: str, columns: list[str], rows: list[list], artifact_type: str | None = None
) -> None:
    """Log rows whose cells are numbers, strings or image tensors; `artifact_type` names the kind of a versioned
    copy."""
    native = _native(trainer, "log_table")
    for logger, log in native:
        log(logger, key, columns, rows, artifact_type)
    if native:
        return
    folder = _local_dir(trainer, key)
    table_file = folder / f"step{trainer.global_step:06d}.csv"
    with table_file.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        for row_index, row in enumerate(rows):
            writer.writerow([_save_cell(cell, table_file, row_index) for cell in row])


def _save_cell(cell, table_file: Path, row_index: int):
    if not isinstance(cell, torch.Tensor):
        return cell
    from torchvision.utils import save_image

    image_file = table_file.with_name(f"{table_file.stem}_row{row_index:04d}.png")
    save_image(displayable(cell[None]), image_file)
    return image_file.name
