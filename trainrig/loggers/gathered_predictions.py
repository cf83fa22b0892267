"""What `cli.py predict` produced on every process, gathered onto every process and keyed by each item's index in the
data set, for a prediction writer."""

from collections.abc import Callable, Iterable
from typing import Any

import torch.distributed as dist
from lightning.pytorch import Trainer


def predictions_by_index(
    trainer: Trainer, predictions: list, batch_indices: list, items: Callable[[Any], Iterable]
) -> dict[int, Any]:
    """Every process's predictions of the one predict dataloader, keyed by their item's index in the data set and
    merged on every process (`items` turns a predicted batch into one entry per item). Keyed by index, each item
    counts once: a distributed sampler deals the items out in turn and repeats some so that every process gets as
    many, and some strategies feed every process the same batches. Sorted by key: the data set's order."""
    (indices_per_batch,) = batch_indices  # Lightning lists them per predict dataloader; the examples have one
    by_index = {
        index: item
        for batch, indices in zip(predictions, indices_per_batch, strict=True)
        for index, item in zip(indices, items(batch), strict=True)
    }
    if trainer.world_size > 1 and dist.is_available() and dist.is_initialized():
        gathered: list[dict[int, Any] | None] = [None] * trainer.world_size
        dist.all_gather_object(gathered, by_index)
        by_index = {index: item for rank_items in gathered for index, item in rank_items.items()}
    return by_index
