"""How fast a job recovers from a lost rank, and whether a job killed again and again still ends exactly.

    python benchmarks/recovery.py [--repeats 3] [--only recovery|load|chaos|streaming] [--chaos-minutes 5]
                                  [--loads idle,saturated,oversubscribed]

recovery  From `kill -9` of one of two ranks to the next training step of the restarted job, on the embedded Dask
          cluster (`--dask.max_restarts 1`) and under `torchrun --max-restarts 1` (target: at most 20 s each).
          The launchers alternate within each repeat.
load      Time to recover, as `recovery` measures it, against the machine's load (`--loads`): idle; saturated, one
          CPU-bound process per usable core besides the job; oversubscribed, two per core (trainrig/testing/load.py,
          which the tests under load use too). The load runs from the job's start to the recovered step, as a busy
          node's other work does. Each repeat runs every load and launcher, in turn order reversed every other repeat.
chaos     A Dask job of at least `--chaos-minutes` of training with a random rank killed about every minute
          (`--dask.max_restarts 100`) against the same job uninterrupted: it must finish with the same final
          weights, bit for bit (deterministic CPU training).
streaming The steady-state cost of sending each checkpoint to the Dask client: one epoch of the CNN example
          (`configs/cnn.yaml`, 134 MB checkpoints) on 2 Dask workers saving `last.ckpt` every 4 steps, with the
          checkpoints sent to the client against written to `--dask.checkpoint_dir`, alternated; the paired
          difference of epoch times per save, over the default 5-minute interval (target: at most 2%).

The staged MLP example (`configs/mlp.yaml`, generated shapes) with `last.ckpt` every 10 steps; a recorder callback
(benchmarks/resume.py's StepRecorder) writes each training step's wall-clock time, so the kill is timed against
the run's own steps.
"""

import argparse
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import torch
import yaml

from trainrig.testing.load import LOAD_MODES, saturated_cpu, usable_cores

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.alternation import in_turn  # noqa: E402

SETTINGS = {
    "seed_everything": 7,
    "trainer": {
        "deterministic": True,
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "num_sanity_val_steps": 0,
        "callbacks": [
            {"class_path": "trainrig.resume.checkpoint.ResumableCheckpoint", "init_args": {"every_n_train_steps": 10}},
        ],
    },
    "data": {"init_args": {"num_workers": 0, "batch_size": 32}},
}
RANK_LINE = re.compile(r"rank (\d) on worker \S+ \(pid (\d+)\)")


def write_config(folder: Path, record: Path, max_epochs: int) -> Path:
    settings = yaml.safe_load(yaml.safe_dump(SETTINGS))
    settings["trainer"]["max_epochs"] = max_epochs
    settings["trainer"]["callbacks"].append(
        {"class_path": "benchmarks.resume.StepRecorder", "init_args": {"path": str(record)}}
    )
    path = folder / "settings.yaml"
    path.write_text(yaml.safe_dump(settings))
    return path


def command(launcher: str, folder: Path, settings: Path, *extra: str) -> list[str]:
    args = ["fit", "--config", str(ROOT / "configs" / "mlp.yaml"), "--config", str(settings)]
    args += ["--trainer.logger.init_args.save_dir", str(folder / "logs"), *extra]
    if launcher == "dask":
        return [sys.executable, str(ROOT / "cli.py"), *args, "--dask.n_workers", "2"]
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    ddp = ["--trainer.strategy", "ddp", "--trainer.devices", "2", "--ckpt_path", "last"]
    return [*torchrun, "--max-restarts", "1", str(ROOT / "cli.py"), *args, *ddp]


def start(argv: list[str]) -> tuple[subprocess.Popen, list[str]]:
    """The process, and its output lines as they arrive (read by a thread)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True).start()
    return process, lines


def step_starts(record: Path) -> list[tuple[int, float]]:
    if not record.is_file():
        return []
    return [
        (int(step), float(started)) for step, started, _ in (line.split() for line in record.read_text().splitlines())
    ]


def rank_pids(process: subprocess.Popen, lines: list[str], launcher: str) -> dict[int, int]:
    """Each rank's process id, the latest attempt's: the Dask client prints them; torchrun's are its children."""
    if launcher == "dask":
        matches = [match.groups() for line in list(lines) if (match := RANK_LINE.search(line))]
        return {int(rank): int(pid) for rank, pid in matches}
    children = psutil.Process(process.pid).children(recursive=True)
    workers = sorted(child.pid for child in children if "cli.py" in " ".join(child.cmdline()))
    return dict(enumerate(workers))


def wait_for(condition, process: subprocess.Popen, lines: list[str], timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("benchmark run ended or stalled:\n" + "".join(lines[-40:]))
        time.sleep(0.05)


def stop(process: subprocess.Popen) -> None:
    """Kill the run and every process it started (torchrun's workers start sessions of their own)."""
    processes = [process_ for process_ in [psutil.Process(process.pid)] if process_.is_running()]
    processes += processes[0].children(recursive=True) if processes else []
    for running in processes:
        try:
            running.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(processes, timeout=30)
    process.wait()


def recovery_seconds(launcher: str, scratch: Path, rank: int) -> float:
    folder = scratch / f"{launcher}-{rank}-{time.time_ns()}"
    folder.mkdir()
    record = folder / "steps.txt"
    restarts = ["--dask.max_restarts", "1"] if launcher == "dask" else []
    process, lines = start(command(launcher, folder, write_config(folder, record, 100), *restarts))
    try:
        # Killed 3-7 steps after a checkpoint (every 10 steps), so the restarted job's first step is one that was
        # already trained; a step the surviving rank starts before it notices comes after them.
        def ready() -> bool:
            steps = step_starts(record)
            return len(steps) >= 50 and 3 <= steps[-1][0] % 10 <= 7 and len(rank_pids(process, lines, launcher)) == 2

        wait_for(ready, process, lines)
        os.kill(rank_pids(process, lines, launcher)[rank], signal.SIGKILL)
        killed_at = time.time()
        reached = max(step for step, _ in step_starts(record))

        def resumed() -> list[float]:
            return [started for step, started in step_starts(record) if started > killed_at and step <= reached]

        wait_for(resumed, process, lines, timeout=300)
        return min(resumed()) - killed_at
    finally:
        stop(process)


def recovery(repeats: int) -> None:
    print(f"## Recovery from kill -9 of one of two ranks, to the next training step ({repeats} repeats)")
    seconds = {"dask": [], "torchrun": []}
    with tempfile.TemporaryDirectory() as scratch:
        for repeat in range(repeats):
            for launcher in in_turn(seconds, repeat):
                seconds[launcher].append(recovery_seconds(launcher, Path(scratch), rank=repeat % 2))
                print(f"repeat {repeat + 1}, {launcher}, rank {repeat % 2} killed: {seconds[launcher][-1]:.1f} s")
    for launcher, values in seconds.items():
        print(f"{launcher}: median {statistics.median(values):.1f} s (range {min(values):.1f}-{max(values):.1f})")


def recovery_against_load(repeats: int, loads: list[str]) -> None:
    print(
        f"## Recovery from kill -9 of one of two ranks against load ({repeats} repeats, {usable_cores()} usable "
        "cores; load processes per core: " + ", ".join(f"{load} {LOAD_MODES[load]}" for load in loads) + ")"
    )
    runs = [(load, launcher) for load in loads for launcher in ("dask", "torchrun")]
    seconds: dict[tuple[str, str], list[float]] = {run: [] for run in runs}
    with tempfile.TemporaryDirectory() as scratch:
        for repeat in range(repeats):
            for load, launcher in in_turn(runs, repeat):
                with saturated_cpu(LOAD_MODES[load]):
                    taken = recovery_seconds(launcher, Path(scratch), rank=repeat % 2)
                seconds[load, launcher].append(taken)
                print(f"repeat {repeat + 1}, {load}, {launcher}, rank {repeat % 2} killed: {taken:.1f} s")
    for (load, launcher), values in seconds.items():
        print(
            f"{load}, {launcher}: median {statistics.median(values):.1f} s (range {min(values):.1f}-{max(values):.1f})"
        )


def final_weights(folder: Path) -> dict[str, torch.Tensor]:
    (path,) = folder.rglob("last.ckpt")
    return torch.load(path, map_location="cpu", weights_only=False)["state_dict"]


def chaos(minutes: float) -> None:
    print(f"## Chaos: a Dask job of at least {minutes} min, a random rank killed about every minute")
    with tempfile.TemporaryDirectory() as scratch:
        calm = Path(scratch) / "uninterrupted"
        calm.mkdir()
        record = calm / "steps.txt"
        # One epoch's time decides how many make the job last long enough.
        process, lines = start(command("dask", calm, write_config(calm, record, 1)))
        if process.wait() != 0:
            raise SystemExit("".join(lines[-40:]))
        starts = step_starts(record)
        epochs = max(1, round(minutes * 60 / (starts[-1][1] - starts[0][1])))
        for name in ("steps.txt", "logs"):
            subprocess.run(["rm", "-rf", str(calm / name)], check=True)
        began = time.monotonic()
        process, lines = start(command("dask", calm, write_config(calm, record, epochs)))
        if process.wait() != 0:
            raise SystemExit("".join(lines[-40:]))
        print(f"uninterrupted: {epochs} epochs in {(time.monotonic() - began) / 60:.1f} min")

        chaotic = Path(scratch) / "chaos"
        chaotic.mkdir()
        draw = random.Random(0)
        began = time.monotonic()
        argv = command(
            "dask", chaotic, write_config(chaotic, chaotic / "steps.txt", epochs), "--dask.max_restarts", "100"
        )
        process, lines = start(argv)
        kills = 0
        while process.poll() is None:
            deadline = time.monotonic() + draw.uniform(45, 75)
            while process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.5)
            pids = rank_pids(process, lines, "dask")  # the latest attempt's pids come last
            if process.poll() is None and pids:
                try:
                    os.kill(pids[draw.randrange(len(pids))], signal.SIGKILL)
                    kills += 1
                except ProcessLookupError:
                    pass
        restarts = [line.strip() for line in lines if "restart " in line and " of 100" in line]
        minutes_taken = (time.monotonic() - began) / 60
        print(
            f"chaos: exit {process.returncode} after {minutes_taken:.1f} min, {kills} kills, {len(restarts)} restarts"
        )
        for line in restarts:
            print(f"  {line}")
        same = all(torch.equal(a, b) for a, b in zip(final_weights(chaotic).values(), final_weights(calm).values()))
        print(f"final weights equal the uninterrupted run's, bit for bit: {same}")


def streaming_cost(repeats: int, every: int = 4, default_interval_s: float = 300) -> None:
    print(f"## Streaming checkpoints to the Dask client (CNN, one epoch, last.ckpt every {every} steps)")
    seconds = {"sent to the client": [], "shared directory": []}
    saves = 0
    with tempfile.TemporaryDirectory() as scratch:
        for repeat in range(repeats):
            for variant in in_turn(seconds, repeat):
                folder = Path(scratch) / f"{variant.replace(' ', '-')}-{repeat}"
                folder.mkdir()
                record = folder / "steps.txt"
                config = yaml.safe_load((ROOT / "configs" / "cnn.yaml").read_text())
                config["trainer"].update(max_epochs=1, limit_val_batches=2, enable_progress_bar=False)
                config["trainer"]["callbacks"] = [
                    {
                        "class_path": "trainrig.resume.checkpoint.ResumableCheckpoint",
                        "init_args": {"every_n_train_steps": every},
                    },
                    {"class_path": "benchmarks.resume.StepRecorder", "init_args": {"path": str(record)}},
                ]
                config["trainer"]["logger"]["init_args"]["save_dir"] = str(folder / "logs")
                (folder / "cnn.yaml").write_text(yaml.safe_dump(config))
                argv = [sys.executable, str(ROOT / "cli.py"), "fit", "--config", str(folder / "cnn.yaml")]
                argv += ["--dask.n_workers", "2", "--dask.max_restarts", "0"]
                argv += ["--dask.checkpoint_dir", str(folder / "shared")] if variant == "shared directory" else []
                process, lines = start(argv)
                if process.wait() != 0:
                    raise SystemExit("".join(lines[-40:]))
                steps = step_starts(record)
                seconds[variant].append(steps[-1][1] - steps[0][1])  # first to last step start, both ranks
                saves = max(step for step, _ in steps) // every
    per_save = [(sent - shared) / saves for sent, shared in zip(*seconds.values())]
    shares = [100 * cost / default_interval_s for cost in per_save]
    for variant, values in seconds.items():
        print(
            f"epoch, checkpoints {variant}: median {statistics.median(values):.1f} s "
            f"({min(values):.1f}-{max(values):.1f})"
        )
    print(
        f"streaming cost per save ({saves} saves an epoch): median {statistics.median(per_save):.2f} s "
        f"({min(per_save):.2f}-{max(per_save):.2f}); share of training at the default {default_interval_s:.0f} s "
        f"interval: {statistics.median(shares):.2f}% ({min(shares):.2f}-{max(shares):.2f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--chaos-minutes", type=float, default=5)
    parser.add_argument("--only", choices=["recovery", "load", "chaos", "streaming"])
    parser.add_argument(
        "--loads", type=lambda text: text.split(","), default=list(LOAD_MODES), help="for load: comma-separated"
    )
    args = parser.parse_args()
    if unknown := set(args.loads) - set(LOAD_MODES):
        parser.error(f"--loads: unknown {', '.join(sorted(unknown))}; choose from {', '.join(LOAD_MODES)}")
    if args.only in (None, "recovery"):
        recovery(args.repeats)
    if args.only in (None, "load"):
        recovery_against_load(args.repeats, args.loads)
    if args.only in (None, "chaos"):
        chaos(args.chaos_minutes)
    if args.only in (None, "streaming"):
        streaming_cost(args.repeats)


if __name__ == "__main__":
    main()
