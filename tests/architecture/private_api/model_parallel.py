"""What the model-parallel strategies touch."""

import torch
from lightning.pytorch.strategies import DDPStrategy, SingleDeviceStrategy

MODULE_NAMES = {
    (
        "lightning.pytorch.strategies.launchers",
        "_SubprocessScriptLauncher",
    ): "trainrig/strategies/pipeline_checks.py (subclassed)",
    ("lightning.fabric.utilities.optimizer", "_optimizers_to_device"): "trainrig/strategies/pipeline.py",
}
ATTRIBUTES = [
    ("SingleDeviceStrategy", lambda: SingleDeviceStrategy("cpu"), "_root_device", "trainrig/strategies/layer_split.py"),
    ("DDPStrategy", DDPStrategy, "_configure_launcher", "trainrig/strategies/pipeline.py (overridden)"),
    ("DDPStrategy", DDPStrategy, "_launcher", "trainrig/strategies/pipeline.py (assigned)"),
    ("DDPStrategy", DDPStrategy, "_get_process_group_backend", "trainrig/strategies/pipeline.py"),
    ("torch.nn.Module", torch.nn.Module, "_modules", "trainrig/strategies/stages.py"),
]
