"""Writes the names produced by `cli.py predict` to a text file, title-cased, in the order of their predict items,
from global rank 0 only."""

from pathlib import Path

import torch.distributed as dist
from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.callbacks import BasePredictionWriter

from datamodules.pet_names import display_name


class GeneratedNamesWriter(BasePredictionWriter):
    def __init__(self, output_file: str | None = None):
        """
        Args:
            output_file: where to write; by default `generated_names.txt` in the run's log directory,
                so a new prediction never overwrites an earlier one.
        """
        super().__init__(write_interval="epoch")
        self.output_file = output_file

    def write_on_epoch_end(self, trainer: Trainer, pl_module: LightningModule, predictions, batch_indices) -> None:
        """Names in the order of their predict items, each once: a distributed sampler deals the items out in
        turn and repeats some so that every process gets as many."""
        (dataloader_indices,) = batch_indices  # Lightning lists them per predict dataloader; pet names have one
        by_index = {
            index: name
            for batch, indices in zip(predictions, dataloader_indices, strict=True)
            for index, name in zip(indices, batch, strict=True)
        }
        if trainer.world_size > 1 and dist.is_available() and dist.is_initialized():
            gathered: list[dict[int, str] | None] = [None] * trainer.world_size
            dist.all_gather_object(gathered, by_index)
            by_index = {index: name for rank_names in gathered for index, name in rank_names.items()}
        names = [by_index[index] for index in sorted(by_index)]
        output_file = Path(
            self.output_file or Path(trainer.log_dir) / "generated_names.txt"
        )  # every rank: log_dir is a collective call
        if trainer.is_global_zero:
            output_file.parent.mkdir(parents=True, exist_ok=True)
            output_file.write_text("".join(f"{display_name(name)}\n" for name in names), encoding="utf-8")
            print(f"wrote {len(names)} generated names to {output_file}")
