"""The cost of the host boundary: DDP across two emulated hosts against two ranks on one host, paired.

    python benchmarks/hosts.py [--repeats 3] [--steps 40] [--hidden 200]   (as root: network namespaces)
    python benchmarks/hosts.py --only first-step [--repeats 5]

The same job, the MLP example on generated shapes (one CPU thread per rank, no validation), runs as `torchrun` with
two nodes of one process on two emulated hosts (trainrig/testing/hosts.py: network namespaces on a bridge, the ranks
talking over veth pairs) and as `torchrun --standalone` with two processes on one host (loopback), the two cases
alternating. Each run reports rank 0's median step time after warm-up steps; the table gives the medians over
repeats and the median and range of the paired ratios. The MLP is small, so a step is mostly the all-reduce of its
gradients: the ratio is close to the worst case for the boundary. On one machine the "network" is the kernel's
veth and bridge code, not a wire: the figure is the boundary's software cost, not a real network's.

`--only first-step` times a Dask job from the client's `cli.py fit` to rank 0's first training step, on two existing
clusters kept up for the whole run: scheduler and client on h1 with one worker on each of h2 and h3, against the
scheduler, the client and two workers on one host; jobs alternate between them after one untimed job on each (which
draws the data on the workers and imports the project into the worker processes, as any earlier job would have).
"""

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lightning.pytorch import Callback

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.alternation import in_turn  # noqa: E402
from trainrig.testing.hosts import EmulatedHosts, Host, hosts_unavailable  # noqa: E402

WARMUP_STEPS = 5
RUN_TIMEOUT_S = 600
RENDEZVOUS_PORT = 29400
SCHEDULER_PORT = 8786


class StepTimes(Callback):
    """Writes global rank 0's median training step time (seconds, after warm-up) to `path` as JSON."""

    def __init__(self, path: str):
        self.path = path
        self._times: list[float] = []
        self._started = 0.0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._started = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self._times.append(time.perf_counter() - self._started)

    def on_train_end(self, trainer, pl_module) -> None:
        if trainer.is_global_zero:
            Path(self.path).write_text(json.dumps({"median_step_s": statistics.median(self._times[WARMUP_STEPS:])}))


class FirstStep(Callback):
    """Writes the wall-clock time of global rank 0's first training step to `path` (the clock all hosts share)."""

    def __init__(self, path: str):
        self.path = path

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if trainer.is_global_zero and batch_idx == 0:
            Path(self.path).write_text(json.dumps({"first_step_at": time.time()}))


def job(result: Path, steps: int, hidden: int) -> list[str]:
    return [
        str(ROOT / "cli.py"),
        "fit",
        *("--config", str(ROOT / "configs" / "mlp.yaml")),
        *("--trainer.max_epochs", "1", "--trainer.limit_train_batches", str(steps + WARMUP_STEPS)),
        *("--trainer.limit_val_batches", "0", "--trainer.enable_progress_bar", "false"),
        *(
            "--trainer.enable_model_summary",
            "false",
            "--trainer.logger",
            "false",
            "--trainer.enable_checkpointing",
            "false",
        ),
        *("--trainer.callbacks", "benchmarks.hosts.StepTimes", "--trainer.callbacks.path", str(result)),
        *("--model.init_args.hidden_sizes", f"[{hidden}]"),
        *("--data.init_args.root", "shapes", "--data.init_args.images_per_class", "200"),
        *("--data.init_args.batch_size", "64", "--data.init_args.num_workers", "0"),
        *("--trainer.strategy", "ddp", "--trainer.accelerator", "cpu"),
    ]


def run_case(case: str, steps: int, hidden: int, scratch: Path) -> float:
    result = scratch / f"{case}-{time.monotonic_ns()}.json"
    torchrun = [sys.executable, "-m", "torch.distributed.run"]
    with EmulatedHosts(2 if case == "two hosts" else 1) as hosts:
        if case == "two hosts":
            first = hosts[0]
            processes = []
            for host in hosts:
                rendezvous = ["--rdzv_backend", "c10d", "--rdzv_id", "bench"]
                rendezvous += ["--rdzv_endpoint", f"{first.address}:{RENDEZVOUS_PORT}"]
                rendezvous += ["--rdzv_conf", "is_host=1"] if host is first else []
                command = [*torchrun, "--nnodes", "2", "--nproc_per_node", "1", *rendezvous]
                command += [*job(result, steps, hidden), "--trainer.devices", "1", "--trainer.num_nodes", "2"]
                processes.append(host.popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        else:
            command = [*torchrun, "--standalone", "--nproc_per_node", "2", *job(result, steps, hidden)]
            output = dict(stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            processes = [hosts[0].popen([*command, "--trainer.devices", "2"], **output)]
        for process in processes:
            output, _ = process.communicate(timeout=RUN_TIMEOUT_S)
            if process.returncode != 0:
                raise RuntimeError(f"{case} failed:\n{output}")
    return json.loads(result.read_text())["median_step_s"]


def dask_cluster(hosts: EmulatedHosts) -> tuple[str, Host]:
    """A scheduler on the first host and a worker on every other host (two on the only host of one), as the docs
    start them; returns the scheduler's address and the client's host."""
    first = hosts[0]
    env = first.environment(PYTHONPATH=str(ROOT))  # the scheduler unpickles the task: it needs the project too
    address = f"tcp://{first.address}:{SCHEDULER_PORT}"
    quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    scheduler = ["dask", "scheduler", "--host", first.address, "--port", str(SCHEDULER_PORT), "--no-dashboard"]
    first.popen([sys.executable, "-m", *scheduler], env=env, **quiet)
    worker = [sys.executable, "-m", "dask", "worker", address, "--nthreads", "1", "--no-dashboard"]
    for host in hosts.hosts[1:] or [first, first]:
        host.popen(worker, env=host.environment(PYTHONPATH=str(ROOT)), **quiet)
    return address, first


def time_to_first_step(address: str, client_host: Host, scratch: Path) -> float:
    """Seconds from starting `cli.py fit --dask.address` on the client's host to rank 0's first training step."""
    result = scratch / f"first-step-{time.monotonic_ns()}.json"
    command = [sys.executable, str(ROOT / "cli.py"), *job(result, steps=1, hidden=200)[1:]]
    command[command.index("benchmarks.hosts.StepTimes")] = "benchmarks.hosts.FirstStep"
    command[command.index("--trainer.strategy") : command.index("--trainer.strategy") + 2] = []
    command += [
        "--dask.address",
        address,
        "--dask.n_workers",
        "2",
        "--trainer.strategy",
        "ddp",
        "--trainer.strategy.init_args.timeout",
        "0:02:00",
    ]
    started = time.time()
    client = client_host.popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output, _ = client.communicate(timeout=RUN_TIMEOUT_S)
    if client.returncode != 0:
        raise RuntimeError(f"the Dask job failed:\n{output}")
    return json.loads(result.read_text())["first_step_at"] - started


def first_step_pairs(repeats: int) -> None:
    cases = {"three hosts": 3, "one host": 1}
    times: dict[str, list[float]] = {case: [] for case in cases}
    with tempfile.TemporaryDirectory(prefix="bench-hosts-") as scratch, contextlib.ExitStack() as stack:
        clusters = {case: dask_cluster(stack.enter_context(EmulatedHosts(count))) for case, count in cases.items()}
        for case, (address, client_host) in clusters.items():
            print(f"untimed first job on {case}: {time_to_first_step(address, client_host, Path(scratch)):.1f} s")
        for repeat in range(repeats):
            for case in in_turn(cases, repeat):
                times[case].append(time_to_first_step(*clusters[case], Path(scratch)))
                print(f"repeat {repeat + 1} {case}: {times[case][-1]:.3f} s to the first step", flush=True)
    ratios = [across / local for across, local in zip(times["three hosts"], times["one host"])]
    print("| existing Dask cluster | fit to first step, median (range) |\n|---|---|")
    for case, values in times.items():
        print(f"| {case} | {statistics.median(values):.2f} s ({min(values):.2f}-{max(values):.2f}) |")
    print(f"three hosts / one host: median {statistics.median(ratios):.3f}, range {min(ratios):.3f}-{max(ratios):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--hidden", type=int, default=200, help="the MLP's hidden width (gradients to all-reduce)")
    parser.add_argument(
        "--only",
        choices=("step", "first-step"),
        default="step",
        help="step: DDP step time across two hosts against one; first-step: a Dask job's time from fit to its first "
        "step on an existing three-host cluster against a one-host one",
    )
    args = parser.parse_args()
    if (reason := hosts_unavailable()) is not None:
        sys.exit(f"error: {reason}")
    if args.only == "first-step":
        first_step_pairs(args.repeats)
        return
    times: dict[str, list[float]] = {"two hosts": [], "one host": []}
    with tempfile.TemporaryDirectory(prefix="bench-hosts-") as scratch:
        for repeat in range(args.repeats):
            for case in in_turn(times, repeat):
                times[case].append(run_case(case, args.steps, args.hidden, Path(scratch)))
                print(f"repeat {repeat + 1} {case}: {times[case][-1] * 1000:.2f} ms/step", flush=True)
    ratios = [across / local for across, local in zip(times["two hosts"], times["one host"])]
    print("| case | median step (ms) |\n|---|---|")
    for case, values in times.items():
        print(f"| {case} | {statistics.median(values) * 1000:.2f} |")
    print(f"two hosts / one host: median {statistics.median(ratios):.3f}, range {min(ratios):.3f}-{max(ratios):.3f}")


if __name__ == "__main__":
    main()
