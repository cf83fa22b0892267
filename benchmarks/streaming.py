"""What streaming from shards costs against reading the image folder itself: the generated shapes (the image examples'
stand-in data), read by the training loaders the examples use, in this process; no model is trained.

    python benchmarks/streaming.py [--images-per-class 1000] [--repeats 3] [--only throughput|resume|memory] [--quick]

throughput  Samples per second over one epoch of the training split, with 0, 2 and 4 loader workers: the streamed
            shards (`StreamingImagesDataModule`) against the image folder (`SyntheticShapesDataModule`), both
            decoding and augmenting every image the same way, and against reading the same image files' bytes from
            disk without decoding them (the limit of any loader). The three alternate within each repeat, paired; the
            files sit in the page cache after the first pass, as a data set that fits in memory does.
resume      Time to the first batch of a fresh loader given a mid-epoch position (half the epoch read), against the
            same loader at the epoch's start: the position is a count, so resuming reads nothing before it (target:
            the same time, O(1), for the shards as for the folder). Loaders without workers, so the time is the
            loader's own.
memory      Peak resident memory of a fresh process reading one epoch of the shards, or of the folder, at 1x and 10x
            the data set's size: a process holds at most a window of chunks, so the shards' figure stays flat.

The shards are written once per size into a temporary folder with `trainrig.data.shards` (LitData's chunk format),
the images generated there first; everything goes at the end. `--quick` rehearses every measurement with tiny sizes.
"""

import argparse
import gc
import multiprocessing
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.alternation import in_turn  # noqa: E402
from datamodules.streaming_images import StreamingImagesDataModule  # noqa: E402
from datamodules.synthetic_shapes import SyntheticShapesDataModule  # noqa: E402
from trainrig.data.shards import write_shards  # noqa: E402

IMAGE_SIZE = 64
BATCH_SIZE = 64
CHUNK_BYTES = 4 * 2**20
SOURCE = "datamodules.synthetic_shapes.SyntheticShapesDataModule"


class FileBytes(Dataset):
    """The training split's image files, read whole and not decoded: the bytes a loader must at least read."""

    def __init__(self, paths: list[str]):
        self.paths = paths

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> int:
        return len(Path(self.paths[index]).read_bytes())


def folder_datamodule(images: Path, images_per_class: int, workers: int) -> SyntheticShapesDataModule:
    return SyntheticShapesDataModule(
        root=str(images),
        images_per_class=images_per_class,
        image_size=IMAGE_SIZE,
        batch_size=BATCH_SIZE,
        num_workers=workers,
    )


def shards_datamodule(images: Path, shards: Path, images_per_class: int, workers: int) -> StreamingImagesDataModule:
    source = {"class_path": SOURCE, "init_args": {"root": str(images), "images_per_class": images_per_class}}
    return StreamingImagesDataModule(
        shards=str(shards), source=source, image_size=IMAGE_SIZE, batch_size=BATCH_SIZE, num_workers=workers
    )


def prepared(folder: Path, images_per_class: int) -> tuple[Path, Path]:
    """The generated images and their shards for this size: (images, shards)."""
    images, shards = folder / f"images-{images_per_class}", folder / f"shards-{images_per_class}"
    datamodule = shards_datamodule(images, shards, images_per_class, workers=0)
    write_shards(datamodule.shard_source(), str(shards), CHUNK_BYTES)
    return images, shards


def training_loader(kind: str, images: Path, shards: Path, images_per_class: int, workers: int) -> DataLoader:
    """The training loader of `kind`: shards, folder, or bytes (the folder's training files, undecoded)."""
    if kind == "shards":
        datamodule = shards_datamodule(images, shards, images_per_class, workers)
    else:
        datamodule = folder_datamodule(images, images_per_class, workers)
    datamodule.setup("fit")
    if kind != "bytes":
        return datamodule.train_dataloader()
    split = datamodule.train_set
    paths = [split.dataset.samples[index][0] for index in split.indices]
    return DataLoader(FileBytes(paths), batch_size=BATCH_SIZE, shuffle=True, num_workers=workers)


def samples_per_second(loader: DataLoader) -> float:
    started, samples = time.perf_counter(), 0
    for batch in loader:
        samples += len(batch[0]) if isinstance(batch, (list, tuple)) else len(batch)
    return samples / (time.perf_counter() - started)


def throughput(folder: Path, images_per_class: int, repeats: int, workers: list[int]) -> None:
    images, shards = prepared(folder, images_per_class)
    kinds = ["shards", "folder", "bytes"]
    print(f"\nthroughput: samples/s over one training epoch, median of {repeats} (paired, alternating)")
    print(f"{'workers':>8} {'shards':>10} {'folder':>10} {'bytes':>10} {'shards/folder':>14}")
    for count in workers:
        rates = {kind: [] for kind in kinds}
        for repeat in range(repeats):
            for kind in kinds[repeat % 3 :] + kinds[: repeat % 3]:  # each kind first in turn
                loader = training_loader(kind, images, shards, images_per_class, count)
                rates[kind].append(samples_per_second(loader))
                del loader  # its workers end before the next loader's start
        ratios = [shard / folder_rate for shard, folder_rate in zip(rates["shards"], rates["folder"])]
        medians = {kind: statistics.median(values) for kind, values in rates.items()}
        print(
            f"{count:>8} {medians['shards']:>10.0f} {medians['folder']:>10.0f} {medians['bytes']:>10.0f} "
            f"{statistics.median(ratios):>13.2f}x"
        )


def first_batch_seconds(kind: str, images: Path, shards: Path, images_per_class: int, position: dict | None) -> float:
    """A fresh loader (nothing read, no chunk held), given `position` or none: the seconds to its first batch."""
    loader = training_loader(kind, images, shards, images_per_class, workers=0)
    gc.collect()  # the loaders before this one go now, not while it is timed
    started = time.perf_counter()
    if position is not None:
        loader.load_state_dict(position)
    next(iter(loader))
    return time.perf_counter() - started


def mid_epoch_position(kind: str, images: Path, shards: Path, images_per_class: int) -> dict:
    loader = training_loader(kind, images, shards, images_per_class, workers=0)
    batches = iter(loader)
    for _ in range(len(loader) // 2):
        next(batches)
    return loader.state_dict()


def resume(folder: Path, images_per_class: int, repeats: int) -> None:
    images, shards = prepared(folder, images_per_class)
    for kind in ("shards", "folder"):  # untimed: the first loader of a kind pays its imports
        first_batch_seconds(kind, images, shards, images_per_class, None)
    print(f"\nresume: seconds to the first batch of a fresh loader, median of {repeats} (paired, alternating)")
    print(f"{'data':>8} {'at start':>10} {'mid-epoch':>10} {'ratio':>8}")
    for kind in ("shards", "folder"):
        position = mid_epoch_position(kind, images, shards, images_per_class)
        assert 0 < position["consumed"] < position["dataset_size"], position
        start, middle = [], []
        for repeat in range(repeats):
            pair = [(start, None), (middle, position)]
            for times, given in in_turn(pair, repeat):
                times.append(first_batch_seconds(kind, images, shards, images_per_class, given))
        ratios = [resumed / fresh for fresh, resumed in zip(start, middle)]
        print(
            f"{kind:>8} {statistics.median(start):>10.3f} {statistics.median(middle):>10.3f} "
            f"{statistics.median(ratios):>7.2f}x"
        )


def _memory_kib(field: str) -> int:
    """This process's own memory from /proc (getrusage's ru_maxrss keeps the parent's across fork and exec)."""
    (line,) = [line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith(f"{field}:")]
    return int(line.split()[1])


def _read_one_epoch(kind: str, images: str, shards: str, images_per_class: int, results) -> None:
    """In a fresh process: read one training epoch of `kind`; report the resident memory before it and the peak
    (KiB)."""
    loader = training_loader(kind, Path(images), Path(shards), images_per_class, workers=0)
    before = _memory_kib("VmRSS")
    for _ in loader:
        pass
    results.put((before, _memory_kib("VmHWM")))


def peak_memory(kind: str, images: Path, shards: Path, images_per_class: int) -> tuple[int, int]:
    spawn = multiprocessing.get_context("spawn")
    results = spawn.Queue()
    process = spawn.Process(target=_read_one_epoch, args=(kind, str(images), str(shards), images_per_class, results))
    process.start()
    before_and_peak = results.get(timeout=3600)
    process.join()
    return before_and_peak


def memory(folder: Path, images_per_class: int) -> None:
    sizes = [images_per_class, 10 * images_per_class]
    prepared_sizes = {size: prepared(folder, size) for size in sizes}
    print("\nmemory: MiB resident in a process reading one training epoch, no loader workers: its peak, and how far")
    print("the epoch raised it above the process's memory before reading (imports, the loader)")
    print(f"{'data':>8} {'peak 1x':>8} {'10x':>8} {'added 1x':>9} {'10x':>8}")
    for kind in ("shards", "folder"):
        measured = [peak_memory(kind, *prepared_sizes[size], size) for size in sizes]
        peaks = [peak / 1024 for _, peak in measured]
        added = [(peak - before) / 1024 for before, peak in measured]
        print(f"{kind:>8} {peaks[0]:>8.0f} {peaks[1]:>8.0f} {added[0]:>9.0f} {added[1]:>8.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images-per-class", type=int, default=1000, help="the 1x data set (5 shapes)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", choices=("throughput", "resume", "memory"))
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one repeat: a rehearsal, not figures")
    options = parser.parse_args()
    size, repeats, workers = options.images_per_class, options.repeats, [0, 2, 4]
    if options.quick:
        size, repeats, workers = 40, 1, [0, 2]  # 40: a full batch follows the mid-epoch position
    torch.set_num_threads(1)
    print(f"{torch.get_num_threads()} torch thread(s), {multiprocessing.cpu_count()} CPU(s), {size} images per class")
    folder = Path(tempfile.mkdtemp(prefix="streaming-benchmark-"))
    try:
        if options.only in (None, "throughput"):
            throughput(folder, size, repeats, workers)
        if options.only in (None, "resume"):
            resume(folder, size, repeats)
        if options.only in (None, "memory"):
            memory(folder, size)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
