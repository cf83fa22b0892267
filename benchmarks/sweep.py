"""Sweeps of the LSTM example: trials 2 at a time on embedded Dask clusters against one after another, the median
pruner against none, and the best of a sweep against the default config.

    python benchmarks/sweep.py --only parallel --trials 8 --repeats 1 --train-batches 40
    python benchmarks/sweep.py --only pruning --trials 8 --repeats 1 --train-batches 40
    python benchmarks/sweep.py --only quality --trials 16 --train-batches 100

parallel, pruning: each repeat runs `python sweep.py` for both settings of a pair as subprocesses, alternating which
goes first so that load drifting on a shared machine hurts both alike, each in a fresh log directory with the same
seeded TPE sampler: `--sweep.parallel 2` against `1`, every trial a one-rank Dask job on its own embedded cluster
(`--sweep.ranks_per_trial 1`), wall time; `--sweep.pruner median` against `none`, training steps summed over trials
(the last step each reported) and the best value.
quality: a sweep over configs/sweeps/lstm.yaml's space, 2 at a time with the median pruner, and the default
configs/lstm.yaml, every run with the same budget of training batches; the best trial's val/loss against the
default's (both on the held-out names; the best trial is chosen on them, so its figure is optimistic by the
selection).
"""

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.alternation import in_turn  # noqa: E402

RUN_TIMEOUT_S = 3600
SPACE = {
    "model.init_args.optimizer.init_args.lr": {"type": "float", "low": 1e-4, "high": 3e-2, "log": True},
    "model.init_args.hidden_size": {"type": "categorical", "choices": [32, 64, 128]},
}
VALIDATION_EVERY = 5
PAIRS = {
    "parallel": (
        {"parallel": 2, "ranks_per_trial": 1, "pruner": "none"},
        {"parallel": 1, "ranks_per_trial": 1, "pruner": "none"},
    ),
    "pruning": ({"parallel": 1, "pruner": "median"}, {"parallel": 1, "pruner": "none"}),
}


def budget(directory: Path, train_batches: int) -> list[str]:
    """The training arguments every run of a comparison shares: one epoch of `train_batches` batches."""
    return [
        *("--trainer.logger.init_args.save_dir", str(directory), "--trainer.max_epochs", "1"),
        *("--trainer.limit_train_batches", str(train_batches), "--trainer.val_check_interval", str(VALIDATION_EVERY)),
        *("--trainer.limit_val_batches", "4", "--trainer.enable_progress_bar", "false"),
    ]


def run(command: list[str]) -> float:
    """Run `command` from the checkout; its wall time, or exit with its error."""
    start = time.perf_counter()
    result = subprocess.run(
        command,
        cwd=ROOT,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    if result.returncode != 0:
        raise SystemExit(f"{command[1]} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return time.perf_counter() - start


def sweep(directory: Path, trials: int, train_batches: int, space_file: Path | None = None, **settings) -> dict:
    """Run one sweep; its wall time, training steps (the last reported step of every trial) and best value."""
    if space_file is None:
        space_file = directory / "space.json"
        space_file.write_text(json.dumps({"space": SPACE, "pruner_startup_trials": 1}))
    settings = {"trials": trials, **settings}
    command = [sys.executable, "sweep.py", "--config", "configs/lstm.yaml", "--sweep", str(space_file)]
    command += [f"--sweep.{key}={value}" for key, value in settings.items()]
    wall = run(command + budget(directory, train_batches))
    steps, values = 0, []
    for reports in sorted((directory / "sweep_lstm").glob("trial_*/channel/reports.jsonl")):
        lines = [json.loads(line) for line in reports.read_text().splitlines()]
        steps += max(line["step"] for line in lines)
        values.append(lines[-1]["value"])
    return {"wall_s": wall, "steps": steps, "best": min(values)}


def paired(name: str, options) -> None:
    first, second = PAIRS[name]
    results = ([], [])
    for repeat in range(options.repeats):
        for index, settings in in_turn(((0, first), (1, second)), repeat):
            with tempfile.TemporaryDirectory() as directory:
                measured = sweep(Path(directory), options.trials, options.train_batches, **settings)
            results[index].append(measured)
            print(f"repeat {repeat} {name} {settings}: {measured}", flush=True)
    a, b = results
    if name == "parallel":
        ratios = [x["wall_s"] / y["wall_s"] for x, y in zip(a, b)]
        print(
            f"{options.trials} trials, 2 at a time / one after another (one-rank Dask jobs), wall time: median "
            f"{statistics.median(ratios):.2f} (range {min(ratios):.2f}-{max(ratios):.2f}); medians "
            f"{statistics.median(x['wall_s'] for x in a):.0f} s / {statistics.median(y['wall_s'] for y in b):.0f} s"
        )
    else:
        print(
            f"median pruner / none, training steps: median {statistics.median(x['steps'] for x in a)} / "
            f"{statistics.median(y['steps'] for y in b)}; best {[round(x['best'], 4) for x in a]} / "
            f"{[round(y['best'], 4) for y in b]}"
        )


def last_validation_loss(log_dir: Path) -> float:
    (metrics,) = log_dir.rglob("metrics.csv")
    with metrics.open() as handle:
        values = [float(row["val/loss"]) for row in csv.DictReader(handle) if row.get("val/loss")]
    return values[-1]


def quality(options) -> None:
    space = yaml.safe_load((ROOT / "configs" / "sweeps" / "lstm.yaml").read_text())
    with tempfile.TemporaryDirectory() as directory:
        directory = Path(directory)
        space_file = directory / "space.json"
        space_file.write_text(json.dumps({**space, "trials": options.trials}))
        swept = sweep(directory / "sweep", options.trials, options.train_batches, space_file, parallel=2)
        default_s = run(
            [sys.executable, "cli.py", "fit", "--config", "configs/lstm.yaml"]
            + budget(directory / "default", options.train_batches)
        )
        default = last_validation_loss(directory / "default")
        best = yaml.safe_load((directory / "sweep" / "sweep_lstm" / "best.yaml").read_text())
    chosen = {key: best_value(best, key) for key in space["space"]}
    print(
        f"{options.trials}-trial sweep ({swept['wall_s']:.0f} s, {swept['steps']} training steps) best val/loss "
        f"{swept['best']:.4f} with {chosen}; default config {default:.4f} ({default_s:.0f} s); "
        f"{options.train_batches} training batches each"
    )


def best_value(config: dict, dotted_key: str):
    for key in dotted_key.split("."):
        config = config[key]
    return config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["parallel", "pruning", "quality"], action="append")
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--train-batches", type=int, default=40)
    options = parser.parse_args()
    print(f"load average at start: {os.getloadavg()}", flush=True)
    for name in options.only or ["parallel", "pruning", "quality"]:
        if name == "quality":
            quality(options)
        else:
            paired(name, options)
        print(f"load average after {name}: {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
