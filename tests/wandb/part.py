"""What the project-wide tests need to know of the W&B part (tests/helpers/parts.py reads it)."""

LAYERS = {"wandb": {"loggers"}}
