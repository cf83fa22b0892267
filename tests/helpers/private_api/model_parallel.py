"""What the model-parallel strategies touch."""

import torch
from lightning.pytorch.strategies import DDPStrategy, SingleDeviceStrategy

MODULE_NAMES = {
    ("lightning.pytorch.strategies.launchers", "_SubprocessScriptLauncher"): "strategies/pipeline.py (subclassed)",
    ("lightning.fabric.utilities.optimizer", "_optimizers_to_device"): "strategies/pipeline.py",
}
ATTRIBUTES = [
    ("SingleDeviceStrategy", lambda: SingleDeviceStrategy("cpu"), "_root_device", "strategies/layer_split.py"),
    ("DDPStrategy", DDPStrategy, "_configure_launcher", "strategies/pipeline.py (overridden)"),
    ("DDPStrategy", DDPStrategy, "_launcher", "strategies/pipeline.py (assigned)"),
    ("torch.nn.Module", torch.nn.Module, "_modules", "strategies/stages.py"),
]
