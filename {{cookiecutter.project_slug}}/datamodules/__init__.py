"""LightningDataModules: where each example's data comes from and how it is split and batched."""
