"""What the pet-name generator touches."""

from lightning.pytorch import LightningModule

ATTRIBUTES = [("LightningModule", LightningModule, "_trainer", "lightning_modules/name_generator.py")]
