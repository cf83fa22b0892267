"""A test helper the Dask workers import by class path: one rank stops responding, as a hung process would."""

import time
from pathlib import Path

from lightning.pytorch import Callback


class StallingRank(Callback):
    """Rank `rank` sleeps `seconds` before its second batch, first writing the wall-clock time it stalled to `mark`:
    a test bounds how long the run takes to fail from that moment, not from before its interpreters started."""

    def __init__(self, mark: str, rank: int = 1, seconds: float = 60.0):
        self.mark = mark
        self.rank = rank
        self.seconds = seconds

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if trainer.global_rank == self.rank and batch_idx == 1:
            Path(self.mark).write_text(repr(time.time()))
            time.sleep(self.seconds)
