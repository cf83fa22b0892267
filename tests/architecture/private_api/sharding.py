"""What the fsdp2 strategy and the sharded checkpoints touch."""

from lightning.pytorch.strategies import ModelParallelStrategy

MODULE_NAMES = {
    ("torch.distributed.checkpoint.state_dict_loader", "_load_state_dict"): "trainrig/resume/sharded.py",
    ("torch.distributed.checkpoint.default_planner", "_EmptyStateDictLoadPlanner"): "trainrig/resume/sharded.py",
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"): (
        "trainrig/resume/sharded.py (allowed in a shards index)"
    ),
    ("torch.serialization", "_get_layout"): "trainrig/resume/sharded.py (allowed in a shards index)",
    ("torch.distributed._composable", "checkpoint"): "trainrig/strategies/sharding.py (activation checkpointing)",
}
ATTRIBUTES = [
    ("ModelParallelStrategy", ModelParallelStrategy, "_save_distributed_checkpoint", "trainrig/strategies/fsdp2.py"),
    ("ModelParallelStrategy", ModelParallelStrategy, "_data_parallel_size", "trainrig/strategies/fsdp2.py (assigned)"),
]
