"""Which samples a run trained on, written per rank, to check a data order across stops and process counts."""

import hashlib
from pathlib import Path

from lightning.pytorch import Callback


class RecordSamples(Callback):
    """Appends `<epoch> <sha1 of the input>` for every training sample, once its step has finished."""

    def __init__(self, directory: str):
        self.directory = Path(directory)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        lines = [
            f"{trainer.current_epoch} {hashlib.sha1(sample.cpu().numpy().tobytes()).hexdigest()}\n"
            for sample in batch[0]
        ]
        with (self.directory / f"rank{trainer.global_rank}.txt").open("a") as handle:
            handle.writelines(lines)
