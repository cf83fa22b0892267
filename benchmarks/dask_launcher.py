"""Wall time of a short run through the embedded Dask cluster against the same run as plain 2-process DDP, and
seconds per GB a checkpoint takes to come home from a Dask worker against copying the file on disk.

    python benchmarks/dask_launcher.py [--config lstm.yaml] [--repeats 3] [--epochs 2] [--train-batches 8] \
        [--batch-size 2048]
    python benchmarks/dask_launcher.py --checkpoints [--megabytes 134] [--repeats 5]

Each repeat runs `python cli.py fit ...` twice as subprocesses, once with `--dask.n_workers 2` and
once with `--trainer.strategy ddp --trainer.devices 2`, alternating which goes first so that load
drifting on a shared machine hurts both alike. Wall time covers everything a user waits for: imports,
starting the processes (and the cluster), training, and for Dask bringing the results back.
Reports medians and the Dask/DDP ratio (target: at most 1.25).

`--checkpoints`: the launcher's own embedded cluster (2 workers, over tls://). A worker holds a file of random bytes
open as rank 0 holds a checkpoint it wrote (`results_to_client.held_for_client`), and the client reads it in pieces
and stores it as it stores a checkpoint (`run_files.store_checkpoint`: written beside the target, flushed to disk,
renamed). The baseline is `shutil.copy` of the same file on the same disk, the least any transfer can cost. Each
repeat times both, alternating which goes first; reports the median and range of each, in seconds per GB, and of
their per-repeat ratio."""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.alternation import in_turn  # noqa: E402
from trainrig.dask import DaskOptions  # noqa: E402
from trainrig.dask.cluster import connected_client  # noqa: E402
from trainrig.dask.results_to_client import held_for_client  # noqa: E402
from trainrig.dask.run_files import pieces, store_checkpoint  # noqa: E402

RUN_TIMEOUT_S = 1800
CHECKPOINT_CASES = ("dask: from a worker to the client", "shutil.copy on disk")
LAUNCHES = {
    "dask (embedded LocalCluster, 2 workers)": ["--dask.n_workers", "2"],
    "ddp (--trainer.devices 2)": ["--trainer.strategy", "ddp", "--trainer.devices", "2"],
}


def run_args(config: str, epochs: int, train_batches: int, batch_size: int, log_dir: str) -> list[str]:
    return [
        "fit",
        "--config",
        str(ROOT / "configs" / config),
        "--trainer.max_epochs",
        str(epochs),
        "--trainer.limit_train_batches",
        str(train_batches),
        "--trainer.limit_val_batches",
        "2",
        "--trainer.enable_progress_bar",
        "false",
        "--trainer.enable_model_summary",
        "false",
        "--trainer.logger.init_args.save_dir",
        log_dir,
        "--data.init_args.batch_size",
        str(batch_size),
    ]


def timed_run(args: list[str]) -> float:
    environment = {**os.environ, "OMP_NUM_THREADS": "1"}
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "cli.py", *args],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"run failed ({' '.join(args)}):\n{result.stderr[-3000:]}")
    return seconds


def brought_home(client, holder: str, source: Path, target: Path) -> None:
    sent = client.run(held_for_client, source, target.name, "unused", holder, workers=[holder])[holder]
    if not store_checkpoint(target, pieces(client, sent)):
        raise SystemExit(f"the worker {holder} holding {source} is gone")


def described(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f} to {max(values):.2f})"


def checkpoints_brought_home(options: argparse.Namespace) -> None:
    gigabytes = options.megabytes / 1024
    seconds: dict[str, list[float]] = {case: [] for case in CHECKPOINT_CASES}
    with tempfile.TemporaryDirectory() as directory, connected_client(DaskOptions(n_workers=2)) as (client, _):
        source = Path(directory) / "sent.ckpt"
        with source.open("wb") as handle:
            for _ in range(options.megabytes):
                handle.write(os.urandom(2**20))
        holder = sorted(client.scheduler_info()["workers"])[0]
        for repeat in range(options.repeats):
            for case in in_turn(CHECKPOINT_CASES, repeat):
                target = Path(directory) / f"received-{repeat}.ckpt"
                started = time.perf_counter()
                if case == CHECKPOINT_CASES[0]:
                    brought_home(client, holder, source, target)
                else:
                    shutil.copy(source, target)
                seconds[case].append(time.perf_counter() - started)
                target.unlink()
                print(f"repeat {repeat + 1}: {case}: {seconds[case][-1]:.2f} s", flush=True)

    per_gb = {case: [value / gigabytes for value in values] for case, values in seconds.items()}
    ratios = [dask / copy for dask, copy in zip(*seconds.values(), strict=True)]
    print(f"\n{options.megabytes} MB, {options.repeats} repeats")
    print("| case | s per GB: median (range) |")
    print("| --- | --- |")
    for case, values in per_gb.items():
        print(f"| {case} | {described(values)} |")
    print(f"\nratio dask/copy, per repeat: {described(ratios)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="lstm.yaml")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--train-batches", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=2048, help="per rank")
    parser.add_argument("--checkpoints", action="store_true", help="time checkpoints brought home instead")
    parser.add_argument("--megabytes", type=int, default=134, help="with --checkpoints: the file's size (ResNet-18)")
    options = parser.parse_args()
    if options.checkpoints:
        checkpoints_brought_home(options)
        return

    seconds: dict[str, list[float]] = {name: [] for name in LAUNCHES}
    with tempfile.TemporaryDirectory() as log_dir:
        for repeat in range(options.repeats):
            for name in in_turn(LAUNCHES, repeat):
                args = (
                    run_args(options.config, options.epochs, options.train_batches, options.batch_size, log_dir)
                    + LAUNCHES[name]
                )
                seconds[name].append(timed_run(args))
                print(f"repeat {repeat + 1}: {name}: {seconds[name][-1]:.1f} s", flush=True)

    medians = {name: statistics.median(times) for name, times in seconds.items()}
    dask_name, ddp_name = LAUNCHES
    print(
        f"\n{options.config}, {options.epochs} epochs x {options.train_batches} batches of "
        f"{options.batch_size}, {options.repeats} repeats"
    )
    print("| launch | median wall time (s) | all runs (s) |")
    print("| --- | --- | --- |")
    for name, times in seconds.items():
        print(f"| {name} | {medians[name]:.1f} | {', '.join(f'{t:.1f}' for t in times)} |")
    print(f"\nratio dask/ddp: {medians[dask_name] / medians[ddp_name]:.2f} (target <= 1.25)")


if __name__ == "__main__":
    main()
