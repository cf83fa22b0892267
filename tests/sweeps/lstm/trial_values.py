"""What each rank of a sweep trial trained with, written per rank, to check that every rank got the driver's values;
and when each trial's process trained, to check that trials ran at the same time."""

import json
import os
import time
from pathlib import Path

from lightning.pytorch import Callback
from typing_extensions import override


class RecordTrialValues(Callback):
    """Writes `<directory>/rank<N>.json`: the learning rate and hidden size the rank trained with, and the step it
    stopped at."""

    def __init__(self, directory: str):
        self.directory = Path(directory)

    @override
    def on_train_end(self, trainer, pl_module) -> None:
        record = {
            "lr": trainer.optimizers[0].param_groups[0]["lr"],
            "hidden_size": pl_module.hparams["hidden_size"],
            "global_step": trainer.global_step,
        }
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / f"rank{trainer.global_rank}.json").write_text(json.dumps(record))


class RecordTrainingTimes(Callback):
    """Writes `<directory>/<run folder's parent>-<pid>.json` from rank 0: the wall-clock time (time.time()) its
    training started and that of its latest finished batch, so a process killed mid-training still leaves when it
    trained. One file per process: a trial resumed in a new process adds its own."""

    def __init__(self, directory: str):
        self.directory = Path(directory)
        self.path, self.started = None, None

    @override
    def on_train_start(self, trainer, pl_module) -> None:
        if trainer.global_rank == 0:
            self.started = time.time()
            self.path = self.directory / f"{Path(trainer.log_dir).parent.name}-{os.getpid()}.json"
            self.directory.mkdir(parents=True, exist_ok=True)
            self._write(self.started)

    @override
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self.path is not None:
            self._write(time.time())

    def _write(self, latest: float) -> None:
        self.path.write_text(json.dumps({"start": self.started, "end": latest}))
