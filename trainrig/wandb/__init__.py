"""Weights & Biases monitoring (the `wandb` extra): the logger's runs, media and config (`plugin.py`)."""
