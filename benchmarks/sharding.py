"""fsdp2 against DDP on CPU processes (gloo), paired in one run: per-process memory, step time, checkpoint times.

    python benchmarks/sharding.py --repeats 3                 # the figures in docs/performance/sharding.md
    python benchmarks/sharding.py --repeats 1 --steps 2 --image-size 32 --processes 2   # a quick check

For each number of processes (2 and 4) and each repeat, DDP and fsdp2 run back to back on the CNN example's
ResNet-18 (the strategy's own `apply_fully_shard` over the model's `sharding_units()`), Adam, random in-memory data,
one CPU thread per process. Each process reports:
- model state: the bytes of the parameters, gradients and optimizer state it holds after a step (its shards under
  fsdp2), and the peak RSS of the process;
- step time: the median of `--steps` steps after two warm-up steps;
- checkpoint: the time to save and load the sharded state with torch.distributed.checkpoint (fsdp2) against
  gathering the full state on rank 0 and `torch.save` / `torch.load` (DDP); and the time to load the 4-process
  checkpoint on 2 processes (resharding).
Printed as JSON lines and a summary: medians and ranges over the repeats. Run it alone on the machine.
"""

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from models.staged_resnet import StagedResNet  # noqa: E402
from trainrig.strategies.sharding import apply_fully_shard  # noqa: E402


def build_model() -> torch.nn.Module:
    from torchvision.models import resnet18

    torch.manual_seed(0)
    return StagedResNet(resnet18(num_classes=10), num_stages=1)


def local_bytes(tensor: torch.Tensor) -> int:
    local = tensor.to_local() if hasattr(tensor, "to_local") else tensor
    return local.numel() * local.element_size()


def model_state_bytes(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, int]:
    parameters = list(model.parameters())
    state = [value for entry in optimizer.state.values() for value in entry.values() if torch.is_tensor(value)]
    return {
        "parameters": sum(local_bytes(p) for p in parameters),
        "gradients": sum(local_bytes(p.grad) for p in parameters if p.grad is not None),
        "optimizer": sum(local_bytes(value) for value in state),
    }


def worker(rank: int, world_size: int, strategy: str, options: dict, results, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    model = build_model()
    if strategy == "fsdp2":
        from torch.distributed.device_mesh import init_device_mesh

        apply_fully_shard(model, model.sharding_units(), init_device_mesh("cpu", (world_size,)), True)
    else:
        model = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    size, batch = options["image_size"], options["batch_size"]
    images, labels = torch.randn(batch, 3, size, size), torch.randint(0, 10, (batch,))

    def step() -> float:
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=False)
        torch.nn.functional.cross_entropy(model(images), labels).backward()
        optimizer.step()
        return time.perf_counter() - start

    for _ in range(2):
        step()
    times = [step() for _ in range(options["steps"])]
    report = {"strategy": strategy, "processes": world_size, "rank": rank, "step_s": statistics.median(times)}
    report.update(model_state_bytes(model, optimizer))
    report["peak_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    directory = Path(options["directory"]) / f"{strategy}-{world_size}"
    sharded = strategy == "fsdp2"
    from torch.distributed.checkpoint import load, save
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    state_options = StateDictOptions(full_state_dict=not sharded, cpu_offload=True)
    dist.barrier()
    start = time.perf_counter()
    model_state, optimizer_state = get_state_dict(model, optimizer, options=state_options)
    if sharded:
        save({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=directory)
    elif rank == 0:
        torch.save({"model": model_state, "optimizer": optimizer_state}, directory.with_suffix(".pt"))
    dist.barrier()
    report["save_s"] = time.perf_counter() - start
    start = time.perf_counter()
    if sharded:
        model_state, optimizer_state = get_state_dict(model, optimizer)
        loaded = {"model": model_state, "optimizer": optimizer_state}
        load(loaded, checkpoint_id=directory)
        set_state_dict(model, optimizer, model_state_dict=loaded["model"], optim_state_dict=loaded["optimizer"])
    else:
        loaded = torch.load(directory.with_suffix(".pt"), weights_only=False)  # every rank reads the file
        full = StateDictOptions(full_state_dict=True)
        set_state_dict(
            model, optimizer, model_state_dict=loaded["model"], optim_state_dict=loaded["optimizer"], options=full
        )
    dist.barrier()
    report["load_s"] = time.perf_counter() - start
    resharded_from = Path(options["directory"]) / "fsdp2-4"
    if sharded and world_size == 2 and resharded_from.is_dir():
        start = time.perf_counter()
        model_state, optimizer_state = get_state_dict(model, optimizer)
        loaded = {"model": model_state, "optimizer": optimizer_state}
        load(loaded, checkpoint_id=resharded_from)
        set_state_dict(model, optimizer, model_state_dict=loaded["model"], optim_state_dict=loaded["optimizer"])
        dist.barrier()
        report["reshard_4_to_2_s"] = time.perf_counter() - start
    results.put(report)
    dist.destroy_process_group()


def run(strategy: str, world_size: int, options: dict, port: int) -> list[dict]:
    context = mp.get_context("spawn")
    results = context.Queue()
    processes = mp.start_processes(
        worker, (world_size, strategy, options, results, port), nprocs=world_size, join=False, start_method="spawn"
    )
    reports = [results.get() for _ in range(world_size)]  # before joining: a process exits once its report is read
    processes.join()
    return sorted(reports, key=lambda report: report["rank"])


def summary(reports: list[dict]) -> None:
    keys = ("parameters", "gradients", "optimizer", "peak_rss", "step_s", "save_s", "load_s", "reshard_4_to_2_s")
    groups: dict[tuple, list[dict]] = {}
    for report in reports:
        groups.setdefault((report["processes"], report["strategy"]), []).append(report)
    for (processes, strategy), group in sorted(groups.items()):
        cells = []
        for key in keys:
            values = [report[key] for report in group if key in report]
            if values:
                scale, unit = (1, "s") if key.endswith("_s") else (2**20, "MiB")
                median = statistics.median(values) / scale
                cells.append(f"{key} {median:.3g} {unit} [{min(values) / scale:.3g}-{max(values) / scale:.3g}]")
        print(f"{processes} processes, {strategy}: " + ", ".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=16, help="per process")
    parser.add_argument("--processes", type=int, nargs="+", default=[4, 2], help="4 first: 2 then reshards it")
    arguments = parser.parse_args()
    reports = []
    with tempfile.TemporaryDirectory() as directory:
        options = {
            "steps": arguments.steps,
            "image_size": arguments.image_size,
            "batch_size": arguments.batch_size,
            "directory": directory,
        }
        port = 29600
        for _ in range(arguments.repeats):
            for world_size in arguments.processes:
                for strategy in ("ddp", "fsdp2"):
                    port += 1
                    for report in run(strategy, world_size, options, port):
                        print(json.dumps(report), flush=True)
                        reports.append(report)
    summary(reports)


if __name__ == "__main__":
    main()
