"""Shards streamed for training in a chunk-local order that resumes exactly, on any number of processes.

The order is the map-style one of trainrig/resume/data_order.py with another permutation: one per (seed, epoch) over
the global sample indices, its position a count into it kept for all ranks together, so a resumed run starts at its
first batch without replaying the epoch, and a run resumed on another number of processes deals out exactly the
samples not yet reached. The permutation is chunk-local: the chunks in a random order, then the samples of each
window of `window_chunks` consecutive chunks shuffled among themselves. The ranks read the same window at the same
time, so each process holds at most a window of chunks (`ShardSamples` keeps that many, the oldest dropped first):
its memory stays flat however large the data set grows. LitData wrote the chunks; this reads them whole, checks them
against the manifest and decodes their samples as data only (trainrig/data/records.py: never with LitData's reader,
whose serializers can unpickle).
"""

import bisect
import struct
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from lightning.pytorch import LightningDataModule
from torch.utils.data import Dataset
from typing_extensions import override

from trainrig.data.location import Location
from trainrig.data.records import check_chunk, check_split
from trainrig.data.shards import Shards, open_shards
from trainrig.errors import UserInputError
from trainrig.resume.data_order import ResumableDataLoader, ResumableSampler, resumable_loader

__all__ = [
    "ChunkLocalSampler",
    "ShardSamples",
    "ShardsDataModule",
    "check_checkpoint_position",
    "loader_positions",
    "streaming_loader",
]


class ShardSamples(Dataset):
    """One split of the shards as a map-style data set: sample `index` decoded by `decode` from its stored record.

    Keeps the `window_chunks` chunks read last in memory, whole (the window the training order reads at a time); a
    DataLoader worker starts with none.
    """

    def __init__(self, shards: Shards, split: str, decode: Callable[[dict], Any], window_chunks: int):
        info = shards.split(split)
        self.fingerprint = shards.fingerprint
        self.folder = Location(shards.location.join(split))
        self.files = [chunk["file"] for chunk in info["chunks"]]
        self.chunk_sizes = [chunk["samples"] for chunk in info["chunks"]]
        self.starts = np.cumsum([0, *self.chunk_sizes]).tolist()
        self.chunk_bytes = [chunk["bytes"] for chunk in info["chunks"]]
        self.format = check_split(info, str(self.folder))
        self.decode = decode
        self.window_chunks = window_chunks
        self.held: OrderedDict[int, bytes] = OrderedDict()

    def __len__(self) -> int:
        return self.starts[-1]

    def __getstate__(self) -> dict:
        return {**self.__dict__, "held": OrderedDict()}

    def chunk(self, number: int) -> bytes:
        """Chunk `number`'s bytes, read unless held; the one held longest unused is dropped."""
        if number in self.held:
            self.held.move_to_end(number)
            return self.held[number]
        data = self.folder.read(self.files[number])
        if data is None:
            raise UserInputError(f"shards at {self.folder}: chunk {self.files[number]} is gone")
        check_chunk(data, self.files[number], self.chunk_sizes[number], self.chunk_bytes[number], str(self.folder))
        self.held[number] = data
        while len(self.held) > self.window_chunks:
            self.held.popitem(last=False)
        return data

    def record(self, index: int) -> dict:
        """The stored record of sample `index`, decoded as data only (trainrig/data/records.py). A chunk is
        `num_items`, `num_items + 1` offsets (uint32 each), then the items (LitData's writer.py, `_create_chunk`)."""
        number = bisect.bisect_right(self.starts, index) - 1
        data = self.chunk(number)
        begin, end = struct.unpack_from("<II", data, 4 + 4 * (index - self.starts[number]))
        return self.format.decode(memoryview(data)[begin:end])

    def __getitem__(self, index: int):
        return self.decode(self.record(index))


class ChunkLocalSampler(ResumableSampler):
    """ResumableSampler over a chunk-local permutation (the module's docstring says which), its window the one the
    data set keeps in memory."""

    dataset: ShardSamples

    @override
    def epoch_order(self) -> torch.Tensor:
        dataset = self.dataset
        if not self.shuffle:
            return torch.arange(len(dataset))
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        chunks = torch.randperm(len(dataset.chunk_sizes), generator=generator).tolist()
        windows = []
        for first in range(0, len(chunks), dataset.window_chunks):
            members = chunks[first : first + dataset.window_chunks]
            window = torch.cat([torch.arange(dataset.starts[c], dataset.starts[c + 1]) for c in members])
            windows.append(window[torch.randperm(len(window), generator=generator)])
        return torch.cat(windows)


class ShardsDataLoader(ResumableDataLoader):
    """ResumableDataLoader whose data position also names the shards it counts in (their fingerprint)."""

    sampler: ChunkLocalSampler

    @override
    def state_dict(self) -> dict:
        return {**super().state_dict(), "shards": self.sampler.dataset.fingerprint}


def streaming_loader(
    datamodule: LightningDataModule, samples: ShardSamples, batch_size: int, seed_each_sample: bool = False, **kwargs
) -> ShardsDataLoader:
    """trainrig.resume.data_order.resumable_loader over shards: the chunk-local order, the shards named in the
    position."""
    return resumable_loader(
        datamodule,
        samples,
        batch_size,
        seed_each_sample,
        sampler_class=ChunkLocalSampler,
        loader_class=ShardsDataLoader,
        **kwargs,
    )


def loader_positions(checkpoint: dict) -> list[dict]:
    """The training loaders' data positions a checkpoint holds (a streamed one names its shards' fingerprint)."""
    loops = checkpoint.get("loops") or {}
    states = ((loops.get("fit_loop") or {}).get("state_dict") or {}).get("combined_loader") or []
    return [state for state in states if isinstance(state, dict)]


def check_checkpoint_position(ckpt_path: str | None, shards: Shards) -> None:
    """Refuse a checkpoint whose data position counts in other shards: resumed, it would skip and repeat samples of
    this data set. Called by the CLI before the run writes anything (the trainer knows the checkpoint only later)."""
    if ckpt_path is None:
        return
    from trainrig.resume.readable import forget_read_checkpoints, read_checkpoint_file
    from trainrig.resume.sharded import is_sharded_checkpoint, read_metadata

    path = Path(ckpt_path)
    try:
        checkpoint = read_metadata(path) if is_sharded_checkpoint(path) else read_checkpoint_file(path)
        states = loader_positions(checkpoint)
    finally:
        forget_read_checkpoints()
    for state in states:
        saved = state.get("shards")
        if saved is not None and saved != shards.fingerprint:
            raise UserInputError(
                f"checkpoint {ckpt_path} counts its data position in other shards (fingerprint {saved[:12]}) than "
                f"those at {shards.location} ({shards.fingerprint[:12]}); resume with the shards it trained on"
            )


class ShardsDataModule(LightningDataModule):
    """What every streaming datamodule shares: its shards, opened once from `hparams.shards` and refused unless written
    from `hparams.source`, and the check of a checkpoint's data position against them."""

    _opened: Shards | None = None

    @property
    def shards(self) -> Shards:
        if self._opened is None:
            how_to_write = "python -m trainrig.data.shards write --config CONFIG (docs/data.md)"
            self._opened = open_shards(self.hparams.shards, dict(self.hparams.source), how_to_write)
        return self._opened

    def check_checkpoint(self, ckpt_path: str | None) -> None:
        """A checkpoint to resume from must count its data position in these shards (asked before the run)."""
        check_checkpoint_position(ckpt_path, self.shards)
