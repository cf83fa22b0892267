"""Wall time of a short run through the embedded Dask cluster against the same run as plain 2-process DDP.

    python benchmarks/dask_launcher.py [--config lstm.yaml] [--repeats 3] [--epochs 2] [--train-batches 8] \
        [--batch-size 2048]

Each repeat runs `python cli.py fit ...` twice as subprocesses, once with `--dask.n_workers 2` and
once with `--trainer.strategy ddp --trainer.devices 2`, alternating which goes first so that load
drifting on a shared machine hurts both alike. Wall time covers everything a user waits for: imports,
starting the processes (and the cluster), training, and for Dask bringing the results back.
Reports medians and the Dask/DDP ratio (target: at most 1.25).
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.alternation import in_turn  # noqa: E402

RUN_TIMEOUT_S = 1800
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="lstm.yaml")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--train-batches", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=2048, help="per rank")
    options = parser.parse_args()

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
