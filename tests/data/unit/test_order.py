"""The chunk-local training order of streamed shards (trainrig/data/streaming.py), in this process: a permutation
per (seed, epoch) that reads a window of chunks at a time, and a position that resumes on any number of processes."""

import struct
from collections import OrderedDict

import pytest

from trainrig.data.streaming import ChunkLocalSampler, ShardSamples

CHUNK_SIZES = [5, 5, 5, 5, 5, 5, 5, 3]  # the last chunk is short, as a writer's last chunk is
STARTS = [sum(CHUNK_SIZES[:i]) for i in range(len(CHUNK_SIZES) + 1)]


class Chunked:
    """The shape of ShardSamples the sampler reads: sizes and starts of the chunks, and the window."""

    chunk_sizes, starts = CHUNK_SIZES, STARTS

    def __init__(self, window_chunks: int = 2):
        self.window_chunks = window_chunks

    def __len__(self) -> int:
        return STARTS[-1]


def order(epoch: int, seed: int = 3, window: int = 2) -> list[int]:
    sampler = ChunkLocalSampler(Chunked(window), num_replicas=1, rank=0, seed=seed)
    sampler.set_epoch(epoch)
    return sampler.epoch_order().tolist()


def chunk_of(index: int) -> int:
    return next(chunk for chunk in range(len(CHUNK_SIZES)) if STARTS[chunk] <= index < STARTS[chunk + 1])


def test_each_epoch_is_a_permutation_fixed_by_seed_and_epoch():
    assert sorted(order(0)) == list(range(STARTS[-1]))
    assert order(1) == order(1) and order(1) != order(0) and order(1, seed=4) != order(1)


@pytest.mark.parametrize("window", [1, 2, 3])
def test_the_order_reads_one_window_of_chunks_at_a_time(window):
    chunks = [chunk_of(index) for index in order(0, window=window)]
    seen_windows, position = [], 0
    while position < len(chunks):
        members = set()
        while position < len(chunks) and (len(members) < window or chunks[position] in members):
            members.add(chunks[position])
            position += 1
        seen_windows.append(members)
    # Every chunk's samples all lie in one window: no chunk is read again later in the epoch.
    assert sorted(chunk for members in seen_windows for chunk in members) == list(range(len(CHUNK_SIZES)))


def dealt(epoch_start: int, processes: int, batches: int, batch_size: int) -> tuple[list[int], int]:
    """What `processes` ranks train on in `batches` steps from `epoch_start` samples in, and the position after."""
    seen = []
    for rank in range(processes):
        sampler = ChunkLocalSampler(Chunked(), num_replicas=processes, rank=rank, seed=3)
        sampler.set_epoch(1)
        sampler.start = epoch_start
        seen += list(sampler)[: batches * batch_size]
    return seen, epoch_start + processes * batches * batch_size


def test_a_position_resumed_on_2_then_1_then_2_processes_deals_every_sample_once():
    first, position = dealt(0, processes=2, batches=3, batch_size=2)
    second, position = dealt(position, processes=1, batches=5, batch_size=2)
    rest, _ = dealt(position, processes=2, batches=100, batch_size=2)
    rest = rest[: STARTS[-1] - position]  # the last step pads to a whole number of samples per rank
    assert sorted(first + second + rest) == list(range(STARTS[-1]))


def test_a_process_keeps_at_most_its_window_of_chunks():
    reads = []

    class Folder:
        def read(self, name: str) -> bytes:
            reads.append(name)
            return struct.pack("<III", 1, 12, 12)  # a chunk of one empty sample: its count, then its offsets

    samples = ShardSamples.__new__(ShardSamples)
    samples.folder, samples.files, samples.window_chunks = Folder(), [f"c{n}" for n in range(8)], 2
    samples.chunk_sizes, samples.chunk_bytes = [1] * 8, [12] * 8
    samples.held = OrderedDict()
    for number in (0, 1, 0, 2, 3, 0):
        samples.chunk(number)
        assert len(samples.held) <= 2
    assert reads == ["c0", "c1", "c2", "c3", "c0"], "a chunk still held is not read again; the oldest goes first"
