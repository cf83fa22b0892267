"""The cost of the host boundary: DDP across two emulated hosts against two ranks on one host, paired.

    python benchmarks/hosts.py [--repeats 3] [--steps 40] [--hidden 200]   (as root: network namespaces)

The same job, the MLP example on generated shapes (one CPU thread per rank, no validation), runs as `torchrun` with
two nodes of one process on two emulated hosts (tests/helpers/hosts.py: network namespaces on a bridge, the ranks
talking over veth pairs) and as `torchrun --standalone` with two processes on one host (loopback), the two cases
alternating. Each run reports rank 0's median step time after warm-up steps; the table gives the medians over
repeats and the median and range of the paired ratios. The MLP is small, so a step is mostly the all-reduce of its
gradients: the ratio is close to the worst case for the boundary. On one machine the "network" is the kernel's
veth and bridge code, not a wire: the figure is the boundary's software cost, not a real network's.
"""

import argparse
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

from tests.helpers.hosts import EmulatedHosts, hosts_unavailable  # noqa: E402

WARMUP_STEPS = 5
RUN_TIMEOUT_S = 600
RENDEZVOUS_PORT = 29400


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--hidden", type=int, default=200, help="the MLP's hidden width (gradients to all-reduce)")
    args = parser.parse_args()
    if (reason := hosts_unavailable()) is not None:
        sys.exit(f"error: {reason}")
    times: dict[str, list[float]] = {"two hosts": [], "one host": []}
    with tempfile.TemporaryDirectory(prefix="bench-hosts-") as scratch:
        for repeat in range(args.repeats):
            order = ("two hosts", "one host") if repeat % 2 == 0 else ("one host", "two hosts")
            for case in order:
                times[case].append(run_case(case, args.steps, args.hidden, Path(scratch)))
                print(f"repeat {repeat + 1} {case}: {times[case][-1] * 1000:.2f} ms/step", flush=True)
    ratios = [across / local for across, local in zip(times["two hosts"], times["one host"])]
    print("| case | median step (ms) |\n|---|---|")
    for case, values in times.items():
        print(f"| {case} | {statistics.median(values) * 1000:.2f} |")
    print(f"two hosts / one host: median {statistics.median(ratios):.3f}, range {min(ratios):.3f}-{max(ratios):.3f}")


if __name__ == "__main__":
    main()
