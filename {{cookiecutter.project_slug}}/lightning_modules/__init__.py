"""LightningModules: how each example network is trained, validated and used for prediction."""
