"""Times the training epoch alone, as a plain loop is timed without its set-up."""

import time

from lightning.pytorch import Callback


class EpochTimer(Callback):
    def on_train_epoch_start(self, trainer, pl_module):
        self.start = time.perf_counter()

    def on_train_epoch_end(self, trainer, pl_module):
        self.seconds = time.perf_counter() - self.start
