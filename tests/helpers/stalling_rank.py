"""A test helper the Dask workers import by class path: one rank stops responding, as a hung process would."""

import time

from lightning.pytorch import Callback


class StallingRank(Callback):
    def __init__(self, rank: int = 1, seconds: float = 60.0):
        self.rank = rank
        self.seconds = seconds

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if trainer.global_rank == self.rank and batch_idx == 1:
            time.sleep(self.seconds)
