"""What each rank of a sweep trial trained with, written per rank, to check that every rank got the driver's values."""

import json
from pathlib import Path

from lightning.pytorch import Callback


class RecordTrialValues(Callback):
    """Writes `<directory>/rank<N>.json`: the learning rate and hidden size the rank trained with, and the step it
    stopped at."""

    def __init__(self, directory: str):
        self.directory = Path(directory)

    def on_train_end(self, trainer, pl_module) -> None:
        record = {
            "lr": trainer.optimizers[0].param_groups[0]["lr"],
            "hidden_size": pl_module.hparams["hidden_size"],
            "global_step": trainer.global_step,
        }
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / f"rank{trainer.global_rank}.json").write_text(json.dumps(record))
