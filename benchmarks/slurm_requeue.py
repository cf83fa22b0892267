"""How long a requeued SLURM job takes to train again, against a fresh job's start, and how many steps it loses.

    python benchmarks/slurm_requeue.py [--repeats 5] [--steps 60] [--requeue-at 20]

On a real SLURM cluster of emulated hosts (trainrig/testing/slurm.py: slurmctld + 2 slurmd, needs root and Debian's
slurm-wlm and munge), each repeat runs, one after the other, the generated batch script
(`python -m trainrig.slurm.sbatch --nodes 2`, the staged MLP example, DDP over the two hosts):

fresh    `sbatch` to the job's first training step.
requeue  the same job, `scontrol requeue` from outside once it has trained `--requeue-at` steps (as a preemption
         would): from that call to the first step of the requeued run. SLURM holds a requeued job for its
         `cred_expire` (120 s by default; 5 s on the emulated cluster), shown separately.
lost     steps trained before the requeue that the requeued run trains again: the goal is 0 (the tasks checkpoint at
         the next step on SIGTERM).

A recorder callback (StepClock, below) writes every training step's time and the job's restart count. Medians and
ranges over the repeats. Run with nothing else on the machine.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lightning.pytorch import Callback

ROOT = Path(__file__).resolve().parent.parent
POLL_S = 0.05


class StepClock(Callback):
    """Rank 0 appends `restart_count global_step unix_time` after every training step to `path`."""

    def __init__(self, path: str):
        self.path = path

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_rank == 0:
            with open(self.path, "a") as handle:
                handle.write(f"{os.environ.get('SLURM_RESTART_COUNT', '0')} {trainer.global_step} {time.time():.3f}\n")


def steps(clock: Path) -> list[tuple[int, int, float]]:
    if not clock.exists():
        return []
    rows = [line.split() for line in clock.read_text().splitlines() if line.strip()]
    return [(int(restart), int(step), float(at)) for restart, step, at in rows]


def batch_script(folder: Path, clock: Path, total_steps: int) -> Path:
    script = folder / "job.sbatch"
    overrides = [
        "--trainer.max_steps", str(total_steps), "--trainer.max_epochs", "-1", "--trainer.limit_val_batches", "2",
        "--trainer.enable_progress_bar", "false", "--trainer.enable_model_summary", "false",
        "--trainer.deterministic", "true", "--trainer.logger.init_args.save_dir", str(folder / "logs"),
        "--trainer.callbacks+=benchmarks.slurm_requeue.StepClock", "--trainer.callbacks.path", str(clock),
    ]  # fmt: skip
    generator = [sys.executable, "-m", "trainrig.slurm.sbatch", "--nodes", "2", "--config", "configs/mlp.yaml"]
    generator += ["--log", str(folder / "slurm-%j.out"), "--output", str(script), "--", *overrides]
    subprocess.run(generator, cwd=ROOT, check=True, capture_output=True)
    return script


def submit(cluster, script: Path) -> tuple[int, float]:
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    submitted = time.time()
    return cluster.submit(script, ROOT, PATH=path, GLOO_SOCKET_IFNAME="eth0"), submitted


def finish(cluster, job_id: int, folder: Path) -> None:
    fields = cluster.wait_for(job_id, "COMPLETED", "FAILED", "CANCELLED", timeout=900)
    if fields["JobState"] != "COMPLETED":
        log = (folder / f"slurm-{job_id}.out").read_text()[-3000:]
        raise RuntimeError(f"job {job_id} {fields['JobState']}:\n{log}")


def one_repeat(cluster, folder: Path, total_steps: int, requeue_at: int, requeue_delay_s: float) -> dict[str, float]:
    fresh_clock, requeue_clock = folder / "fresh.clock", folder / "requeue.clock"
    fresh_dir, requeue_dir = folder / "fresh", folder / "requeue"
    fresh_dir.mkdir()
    requeue_dir.mkdir()

    job_id, submitted = submit(cluster, batch_script(fresh_dir, fresh_clock, total_steps))
    finish(cluster, job_id, fresh_dir)
    fresh_s = steps(fresh_clock)[0][2] - submitted

    job_id, _ = submit(cluster, batch_script(requeue_dir, requeue_clock, total_steps))
    while not any(step >= requeue_at for _, step, _ in steps(requeue_clock)):
        time.sleep(POLL_S)
    requeued = time.time()
    cluster.client(["scontrol", "requeue", str(job_id)])
    finish(cluster, job_id, requeue_dir)
    recorded = steps(requeue_clock)
    first_run = [step for restart, step, _ in recorded if restart == 0]
    second_run = [(step, at) for restart, step, at in recorded if restart == 1]
    if not second_run:
        raise RuntimeError(f"job {job_id} finished without a requeued run (requeued too late? lower --requeue-at)")
    return {
        "fresh_s": fresh_s,
        "requeue_s": second_run[0][1] - requeued,
        "requeue_without_hold_s": second_run[0][1] - requeued - requeue_delay_s,
        "lost_steps": max(first_run) - (second_run[0][0] - 1),
        "resumed_at_step": second_run[0][0] - 1,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=60, help="training steps of each job")
    parser.add_argument("--requeue-at", type=int, default=20, help="the step after which the job is requeued")
    args = parser.parse_args()
    from trainrig.testing.slurm import REQUEUE_DELAY_S, SlurmCluster, slurm_unavailable

    if (missing := slurm_unavailable()) is not None:
        sys.exit(f"error: {missing}")
    results = []
    with SlurmCluster(nodes=2) as cluster, tempfile.TemporaryDirectory(prefix="slurm-requeue-") as scratch:
        for repeat in range(args.repeats):
            folder = Path(scratch) / f"repeat-{repeat}"
            folder.mkdir()
            results.append(one_repeat(cluster, folder, args.steps, args.requeue_at, REQUEUE_DELAY_S))
            print(f"repeat {repeat}: " + ", ".join(f"{key} {value:.2f}" for key, value in results[-1].items()))
    print(f"\n{args.repeats} repeats, {args.steps} steps, requeued after step {args.requeue_at}; median [min, max]")
    for key in results[0]:
        values = [result[key] for result in results]
        print(f"{key:24s} {statistics.median(values):8.2f} [{min(values):.2f}, {max(values):.2f}]")


if __name__ == "__main__":
    main()
