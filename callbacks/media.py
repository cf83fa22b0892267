"""Images and tables that callbacks log, written as files into the run's log directory.

Images land as PNG grids and tables as CSV files (image cells as PNG paths) under
`<run directory>/media/<key>/`.
"""
# cookiecutter: only with wandb
# A W&B logger gets native images, tables and artifacts instead, so a user without a W&B
# account loses nothing.
# cookiecutter: end

import csv
from pathlib import Path

import torch
from lightning.pytorch import Trainer
from lightning.pytorch.loggers import WandbLogger  # cookiecutter: only with wandb

from resume.run_directory import run_directory


def _displayable(images: torch.Tensor) -> torch.Tensor:
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


# cookiecutter: only with wandb
def _wandb_loggers(trainer: Trainer) -> list[WandbLogger]:
    return [logger for logger in trainer.loggers if isinstance(logger, WandbLogger)]


# cookiecutter: end
def log_images(trainer: Trainer, key: str, images: torch.Tensor, caption: str) -> None:
    images = _displayable(images)
    # cookiecutter: only with wandb
    wandb_loggers = _wandb_loggers(trainer)
    for logger in wandb_loggers:
        logger.log_image(key, images=list(images), caption=[caption] * len(images))
    if wandb_loggers:
        return
    # cookiecutter: end
    from torchvision.utils import save_image

    save_image(images, _local_dir(trainer, key) / f"step{trainer.global_step:06d}.png", nrow=len(images))


def log_table(
    trainer: Trainer, key: str, columns: list[str], rows: list[list], artifact_type: str | None = None
) -> None:
    """Log rows whose cells are numbers, strings or image tensors; `artifact_type` names the kind of a versioned
    copy."""
    # cookiecutter: only with wandb
    wandb_loggers = _wandb_loggers(trainer)
    if wandb_loggers:
        import wandb

        data = [
            [wandb.Image(_displayable(cell[None])[0]) if isinstance(cell, torch.Tensor) else cell for cell in row]
            for row in rows
        ]
        for logger in wandb_loggers:
            table = wandb.Table(columns=columns, data=data)
            logger.experiment.log({key: table})
            if artifact_type:
                artifact = wandb.Artifact(f"{key.replace('/', '_')}_{logger.experiment.id}", type=artifact_type)
                artifact.add(table, key.replace("/", "_"))
                logger.experiment.log_artifact(artifact)
        return
    # cookiecutter: end
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
    save_image(_displayable(cell[None]), image_file)
    return image_file.name
