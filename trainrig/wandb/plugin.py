"""Weights & Biases: runs named by project and id, native images and tables, the config as the run's config, and
the run closed with the job (left to exit handlers, a DDP run's W&B file can miss its last records)."""

import sys
import uuid

import torch

LOGGER_CLASS = "WandbLogger"
RUN_FOLDER = ("project", "WANDB_PROJECT", "id")


def pin_run(init_args: dict) -> str | None:
    """A restart resumes the W&B run by its id. A letter first: the ranks' YAML reader (jsonargparse's) takes an id
    such as 12e45678 for a number, and the run fails on it."""
    if init_args.get("id") is not None or init_args.get("version") is not None:
        return None
    init_args["id"] = f"d{uuid.uuid4().hex[:7]}"
    return f"W&B run id {init_args['id']}: every attempt of this job continues it"


def log_images(logger, key: str, images: torch.Tensor, caption: str) -> None:
    logger.log_image(key, images=list(images), caption=[caption] * len(images))


def log_table(logger, key: str, columns: list[str], rows: list[list], artifact_type: str | None) -> None:
    import wandb

    from trainrig.loggers.media import displayable

    data = [
        [wandb.Image(displayable(cell[None])[0]) if isinstance(cell, torch.Tensor) else cell for cell in row]
        for row in rows
    ]
    table = wandb.Table(columns=columns, data=data)
    logger.experiment.log({key: table})
    if artifact_type:
        artifact = wandb.Artifact(f"{key.replace('/', '_')}_{logger.experiment.id}", type=artifact_type)
        artifact.add(table, key.replace("/", "_"))
        logger.experiment.log_artifact(artifact)


def save_config(logger, config: dict) -> None:
    logger.experiment.config.update(config, allow_val_change=True)


def release() -> None:
    wandb = sys.modules.get("wandb")
    if wandb is not None and wandb.run is not None:
        wandb.finish()
