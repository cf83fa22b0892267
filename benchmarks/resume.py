"""What resumable training costs and what it saves: the CNN example as `python cli.py fit` processes.

    python benchmarks/resume.py [--repeats 5] [--kills 6] [--only cost|lost|startup]

cost     Checkpoint cost at the default interval (5 min of training). A one-epoch CNN run (38 steps) saving
         last.ckpt every 4 steps: the pause after a saving step less the pause after any other step, within the
         same run, is the cost of one save, which over the default interval gives the share of training time spent
         checkpointing (target: at most 2%). A run saving at the epoch end only is alternated with it, and the
         paired difference of their epoch times shown as well: on a busy machine it is mostly noise.
lost     Work lost on `kill -9`: runs that checkpoint every 20 s of training are killed at a random moment, then the
         newest checkpoint's step is compared with the step the run had reached; reported in steps and seconds,
         against the interval (target: at most one interval).
startup  Resume start-up: from launching the process to the first training step, for a fresh run and for one that
         resumes a 10-step run with `--ckpt_path last`, alternated; the median of the paired ratios (target: 1.2x).

A recorder callback (added through the config, as a user would add any callback) appends each training step's
number and wall-clock time to a file, so that the kill and the start-up are timed against the run's own steps.
"""

import argparse
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import yaml
from lightning.pytorch.callbacks import Callback

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.alternation import in_turn  # noqa: E402

CNN_CONFIG = ROOT / "configs" / "cnn.yaml"
DEFAULT_INTERVAL_S = 300
STEPS_PER_EPOCH = 38


class StepRecorder(Callback):
    """Appends `step start_time end_time` for every training step to `path`, flushed at once."""

    def __init__(self, path: str):
        self.path = path
        self._started = 0.0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self._started = time.time()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        with open(self.path, "a") as handle:
            handle.write(f"{trainer.global_step} {self._started:.3f} {time.time():.3f}\n")


def write_config(folder: Path, record: Path, **checkpoint_args) -> Path:
    """configs/cnn.yaml with the ResumableCheckpoint's interval replaced and the step recorder added."""
    config = yaml.safe_load(CNN_CONFIG.read_text())
    callbacks = config["trainer"]["callbacks"]
    for callback in callbacks:
        if callback["class_path"].endswith("ResumableCheckpoint"):
            callback["init_args"] = checkpoint_args
    callbacks.append({"class_path": "benchmarks.resume.StepRecorder", "init_args": {"path": str(record)}})
    path = folder / "benchmark.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def start_run(folder: Path, config: Path, *extra: str) -> subprocess.Popen:
    args = [sys.executable, str(ROOT / "cli.py"), "fit", "--config", str(config)]
    args += ["--trainer.logger.init_args.save_dir", str(folder / "logs"), "--trainer.limit_val_batches", "2", *extra]
    return subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def finish(process: subprocess.Popen) -> None:
    _, errors = process.communicate(timeout=1800)
    if process.returncode != 0:
        raise SystemExit(f"benchmark run failed ({process.returncode}):\n{errors[-2000:]}")


def steps_of(record: Path) -> list[tuple[int, float, float]]:
    if not record.is_file():
        return []
    rows = [line.split() for line in record.read_text().splitlines()]
    return [(int(step), float(start), float(end)) for step, start, end in rows]


def spread(values: list[float], unit: str = "", digits: int = 3) -> str:
    return f"{statistics.median(values):.{digits}f}{unit} (range {min(values):.{digits}f}-{max(values):.{digits}f})"


def save_gaps(steps: list[tuple[int, float, float]], every: int) -> tuple[list[float], list[float]]:
    """Time between one step's end and the next one's start, after steps that saved last.ckpt and after the others.

    Lightning runs checkpoint callbacks after every other batch-end hook, so a save sits in exactly that gap.
    """
    after_save, after_other = [], []
    for (step, _, ended), (_, next_started, _) in zip(steps, steps[1:]):
        (after_save if step % every == 0 else after_other).append(next_started - ended)
    return after_save, after_other


def checkpoint_cost(repeats: int) -> None:
    every, extra_saves = 4, STEPS_PER_EPOCH // 4
    seconds = {"epoch end only": [], f"every {every} steps": []}
    per_save = []
    checkpoint_mb = 0.0
    for repeat in range(repeats):
        for variant in in_turn(seconds, repeat):
            with tempfile.TemporaryDirectory() as scratch:
                folder = Path(scratch)
                record = folder / "steps.txt"
                args = {} if variant == "epoch end only" else {"every_n_train_steps": every}
                process = start_run(folder, write_config(folder, record, **args), "--trainer.max_epochs", "1")
                finish(process)
                steps = steps_of(record)
                seconds[variant].append(steps[-1][2] - steps[0][1])  # first step's start to last step's end
                if variant != "epoch end only":
                    after_save, after_other = save_gaps(steps, every)
                    per_save.append(statistics.median(after_save) - statistics.median(after_other))
                    checkpoint_mb = max(path.stat().st_size for path in folder.rglob("last.ckpt")) / 1e6
    base, frequent = seconds["epoch end only"], seconds[f"every {every} steps"]
    paired = [100 * (with_saves / without - 1) for with_saves, without in zip(frequent, base)]
    print(f"## Checkpoint cost (CNN, one epoch of {STEPS_PER_EPOCH} steps, {repeats} paired repeats)")
    print(
        f"cost of one save of last.ckpt ({checkpoint_mb:.0f} MB), the gap after a saving step less the gap after "
        f"another, within each run: {spread(per_save, ' s')}"
    )
    shares = [100 * cost / (DEFAULT_INTERVAL_S + cost) for cost in per_save]
    print(f"share of training time at the default {DEFAULT_INTERVAL_S} s interval: {spread(shares, ' %')}")
    print(
        f"epoch time, last.ckpt at the epoch end only: {spread(base, ' s', 1)}; with {extra_saves} more saves "
        f"(every {every} steps): {spread(frequent, ' s', 1)}; paired difference {spread(paired, ' %', 1)}"
    )


def work_lost(kills: int, interval_s: int = 20) -> None:
    print(f"## Work lost on kill -9 (CNN, last.ckpt every {interval_s} s of training, {kills} kills)")
    lost_steps, lost_seconds = [], []
    for kill in range(kills):
        with tempfile.TemporaryDirectory() as scratch:
            folder = Path(scratch)
            record = folder / "steps.txt"
            config = write_config(folder, record, train_time_interval=f"0:00:{interval_s:02d}")
            process = start_run(folder, config, "--trainer.max_epochs", "50")
            while not steps_of(record):
                if process.poll() is not None:
                    finish(process)
                time.sleep(0.2)
            time.sleep(random.Random(kill).uniform(interval_s + 5, 3 * interval_s))
            process.send_signal(signal.SIGKILL)
            process.wait()
            killed_at = time.time()
            reached = steps_of(record)[-1][0]
            (last,) = folder.glob("logs/cnn/version_0/checkpoints/last.ckpt")
            saved_step = torch.load(last, map_location="cpu", weights_only=False, mmap=True)["global_step"]
            saved_at = next(end for step, _, end in steps_of(record) if step == saved_step)
            lost_steps.append(reached - saved_step)
            lost_seconds.append(killed_at - saved_at)
            print(
                f"kill {kill + 1}: reached step {reached}, last.ckpt at step {saved_step}: "
                f"lost {reached - saved_step} steps, {killed_at - saved_at:.1f} s"
            )
    print(
        f"lost steps: {spread([float(s) for s in lost_steps], '', 0)}; "
        f"lost seconds: {spread(lost_seconds, ' s', 1)} (interval {interval_s} s; at most one interval "
        f"plus the step and the save in flight)"
    )


def resume_startup(repeats: int, resume_from_step: int = 10) -> None:
    print(f"## Resume start-up (CNN, launch to first training step, {repeats} paired repeats)")
    with tempfile.TemporaryDirectory() as scratch:
        prepared = Path(scratch) / "prepared"
        prepared.mkdir()
        config = write_config(prepared, prepared / "steps.txt", train_time_interval="0:05:00")
        finish(start_run(prepared, config, "--trainer.max_steps", str(resume_from_step)))
        startup = {"fresh": [], "resumed": []}
        for repeat in range(repeats):
            for variant in in_turn(startup, repeat):
                folder = Path(scratch) / f"{variant}-{repeat}"
                if variant == "resumed":
                    shutil.copytree(prepared / "logs", folder / "logs")
                else:
                    folder.mkdir()
                record = folder / "steps.txt"
                config = write_config(folder, record, train_time_interval="0:05:00")
                steps = resume_from_step + 1 if variant == "resumed" else 1
                # No sanity-check validation in either: Lightning skips it when resuming, which would flatter resume.
                extra = ["--trainer.max_steps", str(steps), "--trainer.num_sanity_val_steps", "0"]
                extra += ["--ckpt_path", "last"] if variant == "resumed" else []
                launched = time.time()
                finish(start_run(folder, config, *extra))
                first_step, started, _ = steps_of(record)[0]
                assert first_step == steps, f"{variant} run trained step {first_step}, expected {steps}"
                startup[variant].append(started - launched)
    ratios = [resumed / fresh for resumed, fresh in zip(startup["resumed"], startup["fresh"])]
    print(f"fresh start:   {spread(startup['fresh'], ' s', 2)}")
    print(f"resumed start: {spread(startup['resumed'], ' s', 2)}")
    print(f"ratio resumed/fresh: {spread(ratios, 'x', 2)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--kills", type=int, default=6)
    parser.add_argument("--only", choices=["cost", "lost", "startup"])
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "2")
    if args.only in (None, "cost"):
        checkpoint_cost(args.repeats)
    if args.only in (None, "lost"):
        work_lost(args.kills)
    if args.only in (None, "startup"):
        resume_startup(args.repeats)


if __name__ == "__main__":
    main()
