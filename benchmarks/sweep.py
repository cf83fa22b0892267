"""Sweeps of the LSTM example: trials 2 at a time against one after another, and the median pruner against none.

    python benchmarks/sweep.py [--trials 4] [--repeats 1] [--train-batches 20]

Each repeat runs `python sweep.py` four times as subprocesses, alternating which of a pair goes first so that load
drifting on a shared machine hurts both alike, each in a fresh log directory with the same seeded TPE sampler:
`--sweep.parallel 2` against `--sweep.parallel 1` (wall time), and `--sweep.pruner median` against
`--sweep.pruner none` (training steps summed over trials, from the steps each trial reported, and the best value).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUN_TIMEOUT_S = 3600
SPACE = {
    "model.init_args.optimizer.init_args.lr": {"type": "float", "low": 1e-4, "high": 3e-2, "log": True},
    "model.init_args.hidden_size": {"type": "categorical", "choices": [32, 64, 128]},
}


def sweep(directory: Path, trials: int, train_batches: int, **settings) -> dict:
    """Run one sweep; its wall time, training steps (the last reported step of every trial) and best value."""
    space_file = directory / "space.json"
    space_file.write_text(json.dumps({"space": SPACE, "trials": trials, "pruner_startup_trials": 1, **settings}))
    command = [sys.executable, "sweep.py", "--config", "configs/lstm.yaml", "--sweep", str(space_file)]
    command += ["--trainer.logger.init_args.save_dir", str(directory), "--trainer.max_epochs", "1"]
    command += ["--trainer.limit_train_batches", str(train_batches), "--trainer.val_check_interval", "5"]
    command += ["--trainer.limit_val_batches", "4", "--trainer.enable_progress_bar", "false"]
    start = time.perf_counter()
    result = subprocess.run(
        command,
        cwd=ROOT,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    wall = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"sweep failed ({result.returncode}):\n{result.stderr[-3000:]}")
    steps, values = 0, []
    for reports in sorted((directory / "sweep_lstm").glob("trial_*/channel/reports.jsonl")):
        lines = [json.loads(line) for line in reports.read_text().splitlines()]
        steps += max(line["step"] for line in lines)
        values.append(lines[-1]["value"])
    return {"wall_s": wall, "steps": steps, "best": min(values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--train-batches", type=int, default=20)
    options = parser.parse_args()
    pairs = {
        "parallel": ({"parallel": 2, "pruner": "none"}, {"parallel": 1, "pruner": "none"}),
        "pruning": ({"parallel": 1, "pruner": "median"}, {"parallel": 1, "pruner": "none"}),
    }
    results = {name: ([], []) for name in pairs}
    for repeat in range(options.repeats):
        for name, (first, second) in pairs.items():
            order = [(0, first), (1, second)] if repeat % 2 == 0 else [(1, second), (0, first)]
            for index, settings in order:
                with tempfile.TemporaryDirectory() as directory:
                    measured = sweep(Path(directory), options.trials, options.train_batches, **settings)
                results[name][index].append(measured)
                print(f"repeat {repeat} {name} {settings}: {measured}", flush=True)
    parallel, sequential = results["parallel"]
    ratios = [a["wall_s"] / b["wall_s"] for a, b in zip(parallel, sequential)]
    print(
        f"{options.trials} trials, 2 at a time / one after another, wall time: median {statistics.median(ratios):.2f} "
        f"(range {min(ratios):.2f}-{max(ratios):.2f}); medians {statistics.median(a['wall_s'] for a in parallel):.0f} s"
        f" / {statistics.median(b['wall_s'] for b in sequential):.0f} s"
    )
    pruned, unpruned = results["pruning"]
    print(
        f"median pruner / none, training steps: median {statistics.median(a['steps'] for a in pruned)} / "
        f"{statistics.median(b['steps'] for b in unpruned)}; best {[round(a['best'], 4) for a in pruned]} / "
        f"{[round(b['best'], 4) for b in unpruned]}"
    )


if __name__ == "__main__":
    main()
