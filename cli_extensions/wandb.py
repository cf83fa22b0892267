"""W&B's run closed with the job: left to exit handlers, a DDP run's W&B file can miss its last records."""

import sys


def release() -> None:
    wandb = sys.modules.get("wandb")
    if wandb is not None and wandb.run is not None:
        wandb.finish()
