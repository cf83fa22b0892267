"""Strategy benchmarks on CPU, each case paired against its baseline in one run, one CPU thread per process.

    python benchmarks/strategies.py --only schedules --repeats 3
    python benchmarks/strategies.py --only memory
    python benchmarks/strategies.py --only resnet --repeats 3
    python benchmarks/strategies.py --only pipeline_ddp --repeats 3
    python benchmarks/strategies.py --only ddp --repeats 3

schedules: every torch.distributed.pipelining schedule on 2 processes against the naive split (the
    reference's loop in plain PyTorch: one process, stages one after the other), on a wide staged MLP
    (1024 inputs, four layers of 1024, 10 classes; the classifier sits in the last layer's stage so
    that 2 or 4 stages do equal work), batch 4096. GPipe and 1F1B run 2 stages, one per process; the
    others 4 (two "virtual stages" per process). Besides throughput, each process times what it spends
    inside its stages' forward and backward actions (PipelineStage.forward_one_chunk,
    backward_one_chunk, backward_weight_one_chunk) against the wall time of the schedule's step: the
    measured idle fraction. The formula's idle fraction comes from the schedule's own action table
    (torch's pipeline_order) played with forward = input-backward = weight-backward = 1 and a full
    backward = 2 time units, communication free; for GPipe and 1F1B it is (K-1)/(M+K-1), for
    Interleaved1F1B and LoopedBFS (K-1)/(vM+K-1) with v stages per process.
memory: per process, the peak bytes autograd holds for backward during a step under each schedule
    (distinct tensor storages packed by torch.autograd.graph.saved_tensors_hooks inside the stages'
    forward, counted until autograd frees them, parameters excluded), and the peak RSS.
resnet: the CNN example's ResNet-18 in 2 pipeline stages on 2 processes against DDP on the same 2
    processes, the same global batch; throughput, peak activation bytes and peak RSS per process.
pipeline_ddp: pipeline x data parallel (2 stages x 2 replicas, 4 processes) against DDP on 4
    processes, the same global batch on the wide MLP; first the losses of both against one device
    (plain PyTorch, same data and initial weights), then throughput. 4 processes on 2 cores are
    oversubscribed.
ddp: DDP scaling of the CNN example's ResNet-18 on 128 x 128 images, batch 32 per process, 1 process
    against 2 DDP processes. Efficiency = throughput per process with 2 / with 1.

Every case runs in a fresh process (Lightning starts the others), on random in-memory data, and
reports the median step time after warm-up steps; the cases of a repeat run back to back, ratios
are medians (and ranges) of the per-repeat ratios. On a shared machine each measurement first waits
for idle cores, then counts the CPU time not spent by the benchmark's own processes while it ran
(all busy time in /proc/stat minus theirs), and is repeated when that exceeds --max-interference.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import weakref
from contextlib import nullcontext
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lightning.pytorch import Callback, LightningDataModule, Trainer, seed_everything  # noqa: E402
from torch import nn  # noqa: E402
from torch.distributed.pipelining import schedules as torch_schedules  # noqa: E402
from torch.distributed.pipelining.stage import _PipelineStageBase  # noqa: E402
from torch.nn import functional as F  # noqa: E402
from torch.utils.data import DataLoader, Dataset, DistributedSampler  # noqa: E402

from lightning_modules.image_classifier import ImageClassifier  # noqa: E402
from lightning_modules.mlp_classifier import MLPClassifier  # noqa: E402
from trainrig.strategies.pipeline import PipelineStrategy  # noqa: E402
from trainrig.strategies.pipeline_schedules import SCHEDULE_NAMES  # noqa: E402

MLP_WIDTH, MLP_LAYERS, MLP_CLASSES, MLP_BATCH = 1024, 4, 10, 4096
CNN_IMAGE, CNN_CLASSES, CNN_BATCH = (3, 128, 128), 5, 32
SGD = {"lr": 0.01, "momentum": 0.9}
DISTINCT_BATCHES = 4  # the data repeats after this many batches (per replica)
TWO_STAGE_SCHEDULES = ("GPipe", "1F1B")
RESNET_MICROBATCHES = 4  # of 16 images each
PIPELINE_DDP_BATCH = 8192  # global: 2 replicas x 4096, or 4 DDP processes x 2048
# Time units of each action in the formula's schedule table: a matrix product each for the forward, the
# input gradient and the weight gradient.
ACTION_UNITS = {"F": 1, "I": 1, "W": 1, "B": 2}


def sgd(params):
    return torch.optim.SGD(params, **SGD)


class WideMLP(MLPClassifier):
    """The wide MLP grouped into `num_stages` stages of equal work: the small classifier joins the last layer's."""

    def __init__(self, num_stages: int):
        super().__init__(
            MLP_CLASSES, MLP_WIDTH, (MLP_WIDTH,) * MLP_LAYERS, MLP_LAYERS + 1, optimizer=sgd, scheduler=None
        )
        blocks = list(self.network.blocks)
        layers = [*blocks[:-2], nn.Sequential(*blocks[-2], *blocks[-1])]
        per_stage = MLP_LAYERS // num_stages
        self.network.blocks = nn.ModuleList(
            nn.Sequential(*layers[start : start + per_stage]) for start in range(0, MLP_LAYERS, per_stage)
        )


class RandomSamples(Dataset):
    """Whole batches by tensor indexing: collating thousands of samples one by one would cost ~6% of a pipeline step."""

    def __init__(self, sample_shape: tuple[int, ...], num_classes: int, num_samples: int):
        generator = torch.Generator().manual_seed(0)
        self.inputs = torch.randn(num_samples, *sample_shape, generator=generator)
        self.targets = torch.randint(num_classes, (num_samples,), generator=generator)

    def __len__(self) -> int:
        return len(self.inputs)

    def __getitems__(self, indices: list[int]):
        selection = torch.as_tensor(indices)
        return self.inputs[selection], self.targets[selection]


def whole_batch(batch):
    """The collate step for a dataset whose `__getitems__` already returns the batch."""
    return batch


class RandomBatches(LightningDataModule):
    def __init__(self, sample_shape: tuple[int, ...], num_classes: int, batch_size: int, num_samples: int):
        super().__init__()
        self.data = RandomSamples(sample_shape, num_classes, num_samples)
        self.batch_size = batch_size

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.data, batch_size=self.batch_size, shuffle=False, collate_fn=whole_batch)


def mlp_data(batch_size: int, replicas: int = 1) -> RandomBatches:
    return RandomBatches((MLP_WIDTH,), MLP_CLASSES, batch_size, batch_size * replicas * DISTINCT_BATCHES)


class StepRecorder(Callback):
    """When each step ended, the loss this process computed, and the stage clock at that moment."""

    def __init__(self, clock: "StageClock"):
        self.clock = clock
        self.ends: list[float] = []
        self.losses: list[float] = []
        self.clock_readings: list[tuple[float, float]] = []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if self.clock.saved is not None:
            self.clock.saved.peak = self.clock.saved.live

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.ends.append(time.perf_counter())
        self.losses.append(float(outputs["loss"]))
        self.clock_readings.append((self.clock.compute, self.clock.schedule))
        if self.clock.saved is not None:
            self.clock.peaks.append(self.clock.saved.peak)


class SavedBytes:
    """Bytes of the distinct storages autograd keeps for backward, live and at their peak (parameters excluded)."""

    def __init__(self):
        self.live = self.peak = 0
        self.excluded: set[int] = set()
        self._holders: dict[int, int] = {}

    def pack(self, tensor: torch.Tensor):
        storage = tensor.untyped_storage()
        pointer = storage.data_ptr()
        if pointer in self.excluded:
            return tensor
        if not self._holders.get(pointer):
            self.live += storage.nbytes()
            self.peak = max(self.peak, self.live)
        self._holders[pointer] = self._holders.get(pointer, 0) + 1
        return _Saved(tensor, pointer, storage.nbytes(), self)

    def release(self, pointer: int, nbytes: int) -> None:
        self._holders[pointer] -= 1
        if not self._holders[pointer]:
            del self._holders[pointer]
            self.live -= nbytes

    @staticmethod
    def unpack(packed):
        return packed.tensor if isinstance(packed, _Saved) else packed

    def counting(self, module: nn.Module):
        self.excluded.update(param.untyped_storage().data_ptr() for param in module.parameters())
        return torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack)


class _Saved:
    """A tensor autograd saved; when autograd drops it, its bytes leave the count."""

    def __init__(self, tensor: torch.Tensor, pointer: int, nbytes: int, counter: SavedBytes):
        self.tensor = tensor
        weakref.finalize(self, counter.release, pointer, nbytes)


class StageClock:
    """Seconds this process spent computing inside its pipeline stages, and inside the schedule's steps."""

    def __init__(self, saved: SavedBytes | None):
        self.compute = self.schedule = 0.0
        self.saved = saved
        self.peaks: list[int] = []
        self.last_schedule = None

    def install(self) -> None:
        """Wrap torch's stage actions and schedule steps (class attributes, this process only)."""
        for name in ("forward_one_chunk", "backward_one_chunk", "backward_weight_one_chunk"):
            setattr(_PipelineStageBase, name, self._timed(getattr(_PipelineStageBase, name), "compute"))
        for cls in (torch_schedules.PipelineScheduleSingle, torch_schedules.PipelineScheduleMulti):
            cls.step = self._timed(cls.step, "schedule")

    def _timed(self, method, counter: str):
        clock = self

        def timed(self, *args, **kwargs):
            if counter == "schedule":
                clock.last_schedule = self
            saving = (
                clock.saved.counting(self.submod)
                if clock.saved is not None and method.__name__ == "forward_one_chunk"
                else None
            )
            start = time.perf_counter()
            try:
                if saving is None:
                    return method(self, *args, **kwargs)
                with saving:
                    return method(self, *args, **kwargs)
            finally:
                setattr(clock, counter, getattr(clock, counter) + time.perf_counter() - start)

        return timed


def action_table(schedule) -> dict[int, list[tuple[str, int, int]]]:
    """Each process's compute actions, (kind, stage, micro-batch), in the order the schedule runs them.

    The multi-stage schedules run their own table (pipeline_order); GPipe and 1F1B run code whose order
    is written out here (torch's pipeline_order for 1F1B, a drawing aid, differs from what it runs).
    DualPipeV's overlapped forward-backward pairs run one after the other on a CPU.
    """
    if isinstance(schedule, torch_schedules.PipelineScheduleMulti):
        return {
            rank: [
                (action.computation_type.value, action.stage_index, action.microbatch_index)
                for listed in actions
                if listed is not None
                for action in (listed.sub_actions or (listed,))
                if action.computation_type.value in ACTION_UNITS
            ]
            for rank, actions in schedule.pipeline_order.items()
        }
    stages, count = schedule._num_stages, schedule._n_microbatches
    if isinstance(schedule, torch_schedules.ScheduleGPipe):
        return {rank: [(kind, rank, m) for kind in "FB" for m in range(count)] for rank in range(stages)}
    table = {}
    for rank in range(stages):
        warmup = min(count, stages - rank)
        actions = [("F", rank, m) for m in range(warmup)]
        for backward in range(count):
            actions.append(("B", rank, backward))
            if warmup + backward < count:
                actions.append(("F", rank, warmup + backward))
        table[rank] = actions
    return table


def formula_idle(schedule) -> list[float]:
    """Each process's idle share when it plays the schedule's action table with ACTION_UNITS, communication free."""
    order = action_table(schedule)
    last_stage = max(stage for actions in order.values() for _, stage, _ in actions)
    finished: dict[tuple[str, int, int], float] = {}
    free = dict.fromkeys(order, 0.0)
    busy = dict.fromkeys(order, 0.0)

    def ready_at(kind: str, stage: int, micro: int) -> float | None:
        """When the action's inputs exist: None while they do not."""
        if kind == "F":
            alternatives = [[("F", stage - 1, micro)] if stage > 0 else []]
        elif kind == "W":
            alternatives = [[("I", stage, micro)]]
        elif stage == last_stage:
            alternatives = [[("F", stage, micro)]]
        else:
            alternatives = [[("F", stage, micro), (later, stage + 1, micro)] for later in "IB"]
        for needs in alternatives:
            if all(key in finished for key in needs):
                return max((finished[key] for key in needs), default=0.0)
        return None

    while any(order.values()):
        progressed = False
        for rank, queue in order.items():
            while queue:
                key = queue[0]
                if (ready := ready_at(*key)) is None:
                    break
                queue.pop(0)
                free[rank] = max(free[rank], ready) + ACTION_UNITS[key[0]]
                busy[rank] += ACTION_UNITS[key[0]]
                finished[key] = free[rank]
                progressed = True
        if not progressed:
            raise RuntimeError("the schedule's action table cannot complete")
    makespan = max(free.values())
    return [1 - busy[rank] / makespan for rank in sorted(order)]


def closed_form_idle(schedule: str, microbatches: int, processes: int = 2) -> float | None:
    """The textbook idle share: (K-1)/(vM+K-1) for v stages per process; none for the zero-bubble schedules."""
    if schedule in TWO_STAGE_SCHEDULES:
        return (processes - 1) / (microbatches + processes - 1)
    if schedule in ("Interleaved1F1B", "LoopedBFS"):
        return (processes - 1) / (2 * microbatches + processes - 1)
    return None


def naive_split(steps: int, warmup: int, saved: SavedBytes | None) -> dict:
    """The reference's loop: stage 0 then stage 1 on their devices (here both the cpu), never at once."""
    network = WideMLP(2).network
    optimizer = sgd(network.parameters())
    batches = list(mlp_data(MLP_BATCH).train_dataloader())
    ends, peaks = [], []
    for step in range(steps + warmup + 1):
        images, labels = batches[step % len(batches)]
        optimizer.zero_grad()
        activations = images
        if saved is not None:
            saved.peak = saved.live
        with saved.counting(network) if saved is not None else nullcontext():
            for stage in network.stages():
                activations = stage(activations.to("cpu"))
        F.cross_entropy(activations, labels.to("cpu")).backward()
        optimizer.step()
        ends.append(time.perf_counter())
        if saved is not None:
            peaks.append(saved.peak)
    return {"rank": 0, "step_seconds": median_step_seconds(ends, warmup), "peak_saved": max(peaks[warmup:] or [0])}


def median_step_seconds(ends: list[float], warmup: int) -> float:
    return statistics.median(later - earlier for earlier, later in zip(ends[warmup:], ends[warmup + 1 :]))


def reference_losses(steps: int) -> list[float]:
    """One device, plain PyTorch, the same initial weights and global batches: the losses to reproduce.

    Lightning trains distributed runs on a shuffled DistributedSampler (seed 0, reshuffled each epoch) whose
    replicas' batches of step i together are the i-th batch of the same sampler with one replica.
    """
    seed_everything(0, verbose=False)
    network = WideMLP(2).network
    optimizer = sgd(network.parameters())
    data = mlp_data(PIPELINE_DDP_BATCH).data
    sampler = DistributedSampler(data, num_replicas=1, rank=0, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=PIPELINE_DDP_BATCH, sampler=sampler, collate_fn=whole_batch)
    losses: list[float] = []
    for epoch in range(steps // len(loader) + 1):
        sampler.set_epoch(epoch)
        for images, labels in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(network(images), labels)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return losses[:steps]


def lightning_setup(case: str):
    """The model, data, strategy and process count of a Lightning case."""
    from lightning.pytorch.strategies import DDPStrategy

    kind, _, detail = case.partition(":")
    if kind == "pipeline":
        schedule, microbatches = detail.split(":")
        stages = 2 if schedule in TWO_STAGE_SCHEDULES else 4
        strategy = PipelineStrategy(schedule=schedule, microbatches=int(microbatches))
        return WideMLP(stages), mlp_data(MLP_BATCH), strategy, 2
    if kind == "pipeline_ddp":
        strategy = PipelineStrategy(schedule=detail, microbatches=8, data_parallel=2)
        return WideMLP(2), mlp_data(PIPELINE_DDP_BATCH // 2, replicas=2), strategy, 4
    if kind == "ddp4":
        return WideMLP(2), mlp_data(PIPELINE_DDP_BATCH // 4, replicas=4), DDPStrategy(), 4
    if kind == "resnet_pipeline":
        model = ImageClassifier(CNN_CLASSES, "resnet18", num_stages=2, optimizer=sgd)
        data = RandomBatches(CNN_IMAGE, CNN_CLASSES, 2 * CNN_BATCH, 2 * CNN_BATCH * DISTINCT_BATCHES)
        return model, data, PipelineStrategy(schedule=detail, microbatches=RESNET_MICROBATCHES), 2
    if kind == "resnet_ddp":
        model = ImageClassifier(CNN_CLASSES, "resnet18", num_stages=2, optimizer=sgd)
        data = RandomBatches(CNN_IMAGE, CNN_CLASSES, CNN_BATCH, 2 * CNN_BATCH * DISTINCT_BATCHES)
        return model, data, DDPStrategy(), 2
    processes = 2 if kind == "cnn_ddp" else 1
    model = ImageClassifier(CNN_CLASSES, "resnet18", optimizer=sgd)
    data = RandomBatches(CNN_IMAGE, CNN_CLASSES, CNN_BATCH, CNN_BATCH * processes * DISTINCT_BATCHES)
    return model, data, ("ddp" if processes > 1 else "auto"), processes


def lightning_run(case: str, steps: int, warmup: int, saved: SavedBytes | None) -> dict:
    """This process's measurements (the step time on global rank 0 only)."""
    model, data, strategy, processes = lightning_setup(case)
    clock = StageClock(saved)
    clock.install()
    if saved is not None and not isinstance(strategy, PipelineStrategy):
        whole_forward = model.forward

        def counted_forward(*args, **kwargs):
            with saved.counting(model):
                return whole_forward(*args, **kwargs)

        model.forward = counted_forward
    recorder = StepRecorder(clock)
    trainer = Trainer(
        accelerator="cpu",
        devices=processes,
        strategy=strategy,
        max_steps=steps + warmup + 1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        callbacks=[recorder],
    )
    trainer.fit(model, data)
    (compute_start, schedule_start), (compute_end, schedule_end) = (
        recorder.clock_readings[warmup],
        recorder.clock_readings[-1],
    )
    return {
        "rank": trainer.global_rank,
        "step_seconds": median_step_seconds(recorder.ends, warmup) if trainer.is_global_zero else None,
        "losses": recorder.losses,
        "compute_seconds": compute_end - compute_start,
        "schedule_seconds": schedule_end - schedule_start,
        "step_total_seconds": recorder.ends[-1] - recorder.ends[warmup],
        "peak_saved": max(clock.peaks[warmup:] or [0]),
        "formula_idle": formula_idle(clock.last_schedule) if clock.last_schedule is not None else None,
    }


def run_case(config: dict, folder: Path) -> None:
    """One measurement, in this fresh process; Lightning re-runs this same command for the other ranks."""
    torch.set_num_threads(1)
    seed_everything(0, verbose=False)
    saved = SavedBytes() if config["memory"] else None
    case, steps, warmup = config["case"], config["steps"], config["warmup"]
    result = naive_split(steps, warmup, saved) if case == "naive" else lightning_run(case, steps, warmup, saved)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    result.update(cpu_seconds=usage.ru_utime + usage.ru_stime, max_rss_bytes=usage.ru_maxrss * 1024)
    (folder / f"{safe_name(case)}.rank{result['rank']}.json").write_text(json.dumps(result))


def safe_name(case: str) -> str:
    return case.replace(":", "_")


def cpu_seconds_busy_and_total() -> tuple[float, float]:
    """CPU time all cores spent busy, and in total, since boot (Linux /proc/stat)."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:8]]
    ticks = os.sysconf("SC_CLK_TCK")
    return (sum(fields) - fields[3] - fields[4]) / ticks, sum(fields) / ticks


def idle_fraction(seconds: float) -> float:
    busy_before, total_before = cpu_seconds_busy_and_total()
    time.sleep(seconds)
    busy_after, total_after = cpu_seconds_busy_and_total()
    return 1 - (busy_after - busy_before) / max(1e-9, total_after - total_before)


def wait_until_idle(min_idle: float, give_up_after: float) -> float:
    """On a shared machine, start a measurement only when other work leaves the cores free."""
    deadline = time.monotonic() + give_up_after
    while (idle := idle_fraction(3.0)) < min_idle and time.monotonic() < deadline:
        pass
    return idle


def measure(config: dict, processes: int, folder: Path) -> tuple[list[dict], float]:
    """Every process's measurements, and the share of the cores other processes used meanwhile."""
    name = safe_name(config["case"])
    for old in folder.glob(f"{name}.rank*.json"):
        old.unlink()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    command = [sys.executable, str(Path(__file__).resolve()), "run", json.dumps(config), "--folder", str(folder)]
    busy_before, total_before = cpu_seconds_busy_and_total()
    finished = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    if finished.returncode != 0:
        raise RuntimeError(f"{config['case']} failed:\n{finished.stdout[-2000:]}\n{finished.stderr[-4000:]}")
    deadline = time.monotonic() + 60
    while len(results := list(folder.glob(f"{name}.rank*.json"))) < processes and time.monotonic() < deadline:
        time.sleep(0.2)
    busy_after, total_after = cpu_seconds_busy_and_total()
    ranks = sorted((json.loads(path.read_text()) for path in results), key=lambda rank: rank["rank"])
    others = busy_after - busy_before - sum(rank["cpu_seconds"] for rank in ranks)
    return ranks, max(0.0, others) / max(1e-9, total_after - total_before)


def cases(only: str, microbatches: int) -> dict[str, int]:
    """The cases of a benchmark and their process counts, the baseline first."""
    if only in ("schedules", "memory"):
        return {"naive": 1, **{f"pipeline:{name}:{microbatches}": 2 for name in SCHEDULE_NAMES}}
    if only == "resnet":
        return {"resnet_ddp": 2, "resnet_pipeline:1F1B": 2}
    if only == "pipeline_ddp":
        return {"ddp4": 4, "pipeline_ddp:1F1B": 4}
    return {"cnn_single": 1, "cnn_ddp": 2}


def run_benchmark(args, folder: Path, memory: bool, repeats: int, steps: int, warmup: int) -> dict[str, list[dict]]:
    """Every case `repeats` times, the cases of a repeat back to back; each run's ranks, interference and load."""
    runs: dict[str, list[dict]] = {case: [] for case in cases(args.only, args.microbatches)}
    for repeat in range(repeats):
        for case, processes in cases(args.only, args.microbatches).items():
            config = {"case": case, "steps": steps, "warmup": warmup, "memory": memory}
            attempts = []
            while len(attempts) < args.attempts and (
                not attempts or attempts[0]["interference"] > args.max_interference
            ):
                wait_until_idle(args.min_idle, args.max_wait)
                load = os.getloadavg()[0]
                ranks, interference = measure(config, processes, folder)
                attempts.append({"ranks": ranks, "interference": interference, "load": load})
                attempts.sort(key=lambda attempt: attempt["interference"])
            best = attempts[0]
            runs[case].append(best)
            seconds = best["ranks"][0]["step_seconds"]
            print(
                f"repeat {repeat + 1}/{repeats} {case}: {seconds:.3f} s per step ({best['interference']:.0%} of the "
                f"cores used by others, load average {best['load']:.2f}, attempt {len(attempts)})",
                flush=True,
            )
    return runs


def ratios(runs: dict[str, list[dict]], baseline: str, case: str) -> list[float]:
    """Per repeat: the baseline's step time over the case's (the two ran back to back)."""
    return [
        base["ranks"][0]["step_seconds"] / other["ranks"][0]["step_seconds"]
        for base, other in zip(runs[baseline], runs[case])
    ]


def step_seconds(runs: list[dict]) -> float:
    return statistics.median(run["ranks"][0]["step_seconds"] for run in runs)


def loads(runs: list[dict]) -> str:
    values = [run["load"] for run in runs]
    return f"{min(values):.1f}-{max(values):.1f}"


def ratio_text(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}x ({min(values):.2f}-{max(values):.2f})"


def median_per_process(runs: list[dict], value) -> list[float]:
    return [statistics.median(value(run["ranks"][rank]) for run in runs) for rank in range(len(runs[0]["ranks"]))]


def percentages(values) -> str:
    return " / ".join(f"{value:.1%}" for value in values)


def megabytes(values) -> str:
    return " / ".join(f"{value / 2**20:.0f}" for value in values)


def report_schedules(runs: dict[str, list[dict]], microbatches: int) -> None:
    print(
        f"\nwide staged MLP, batch {MLP_BATCH}, {microbatches} micro-batches, 2 processes x 1 thread; "
        "idle per process (rank 0 / rank 1), medians over repeats\n"
    )
    print(
        "| schedule | stages | samples/s | vs naive split, median (range) | idle measured | idle, schedule table "
        "| closed form | step outside the schedule | load average |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(
        f"| naive split (1 process) | 2 | {MLP_BATCH / step_seconds(runs['naive']):.0f} | 1.00x | | | | | "
        f"{loads(runs['naive'])} |"
    )
    for case, case_runs in runs.items():
        if case == "naive":
            continue
        schedule = case.split(":")[1]
        measured = median_per_process(case_runs, lambda rank: 1 - rank["compute_seconds"] / rank["schedule_seconds"])
        outside = median_per_process(case_runs, lambda rank: 1 - rank["schedule_seconds"] / rank["step_total_seconds"])
        closed = closed_form_idle(schedule, microbatches)
        print(
            f"| {schedule} | {2 if schedule in TWO_STAGE_SCHEDULES else 4} | "
            f"{MLP_BATCH / step_seconds(case_runs):.0f} | {ratio_text(ratios(runs, 'naive', case))} | "
            f"{percentages(measured)} | {percentages(case_runs[0]['ranks'][0]['formula_idle'])} | "
            f"{'' if closed is None else f'{closed:.1%}'} | {percentages(outside)} | {loads(case_runs)} |"
        )


def report_memory(runs: dict[str, list[dict]]) -> None:
    print("\npeak bytes saved for backward (MB) and peak RSS (MB) per process (rank 0 / rank 1)\n")
    print("| schedule | saved for backward, MB | vs GPipe | peak RSS, MB |")
    print("|---|---:|---:|---:|")
    gpipe = next(case for case in runs if case.startswith("pipeline:GPipe"))
    gpipe_saved = median_per_process(runs[gpipe], lambda rank: rank["peak_saved"])
    for case, case_runs in runs.items():
        saved = median_per_process(case_runs, lambda rank: rank["peak_saved"])
        versus = " / ".join(f"{value / base:.2f}" for value, base in zip(saved, gpipe_saved)) if case != "naive" else ""
        name = "naive split (1 process)" if case == "naive" else case.split(":")[1]
        print(
            f"| {name} | {megabytes(saved)} | {versus} | "
            f"{megabytes(median_per_process(case_runs, lambda rank: rank['max_rss_bytes']))} |"
        )


def report_pair(runs: dict[str, list[dict]], memory_runs: dict[str, list[dict]], samples: int, title: str) -> None:
    baseline = next(iter(runs))
    print(f"\n{title}\n")
    print("| setup | samples/s | vs the first, median (range) | saved for backward, MB | peak RSS, MB | load average |")
    print("|---|---:|---:|---:|---:|---:|")
    for case, case_runs in runs.items():
        print(
            f"| {case} | {samples / step_seconds(case_runs):.1f} | {ratio_text(ratios(runs, baseline, case))} | "
            f"{megabytes(median_per_process(memory_runs[case], lambda rank: rank['peak_saved']))} | "
            f"{megabytes(median_per_process(memory_runs[case], lambda rank: rank['max_rss_bytes']))} | "
            f"{loads(case_runs)} |"
        )


def report_correctness(runs: dict[str, list[dict]]) -> None:
    steps = len(next(iter(runs.values()))[0]["ranks"][0]["losses"])
    expected = reference_losses(steps)
    print(f"\nlosses against one device (plain PyTorch, batch {PIPELINE_DDP_BATCH}), {steps} steps of every run:")
    for case, case_runs in runs.items():
        difference = max(
            abs(statistics.fmean(rank["losses"][step] for rank in run["ranks"]) - expected[step])
            for run in case_runs
            for step in range(steps)
        )
        print(
            f"  {case}: max |loss - one device's| = {difference:.2e} (losses {expected[0]:.4f} ... {expected[-1]:.4f})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    subcommands = parser.add_subparsers(dest="command")
    run = subcommands.add_parser("run", help="one measurement (used internally)")
    run.add_argument("config", help="the case as JSON")
    run.add_argument("--folder", type=Path, required=True)
    parser.add_argument("--only", choices=("schedules", "memory", "resnet", "pipeline_ddp", "ddp"), required=True)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=8, help="timed steps per run")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    parser.add_argument("--microbatches", type=int, default=8, help="micro-batches per batch (schedules, memory)")
    parser.add_argument(
        "--min-idle", type=float, default=0.9, help="wait for this idle share of the cores before each measurement"
    )
    parser.add_argument(
        "--max-wait", type=float, default=120, help="seconds to wait for idle cores before measuring anyway"
    )
    parser.add_argument(
        "--max-interference",
        type=float,
        default=0.1,
        help="repeat a measurement when other processes took more of the cores",
    )
    parser.add_argument(
        "--attempts", type=int, default=2, help="measurements per result at most; the least disturbed one counts"
    )
    if sys.argv[1:2] == ["run"]:
        args = run.parse_args(sys.argv[2:])
        run_case(json.loads(args.config), args.folder)
        return
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as folder:
        if args.only == "memory":
            report_memory(run_benchmark(args, Path(folder), True, 1, 2, 1))
        elif args.only == "schedules":
            report_schedules(
                run_benchmark(args, Path(folder), False, args.repeats, args.steps, args.warmup), args.microbatches
            )
        elif args.only == "resnet":
            runs = run_benchmark(args, Path(folder), False, args.repeats, args.steps, args.warmup)
            memory_runs = run_benchmark(args, Path(folder), True, 1, 2, 1)
            report_pair(
                runs,
                memory_runs,
                2 * CNN_BATCH,
                f"resnet18 on {CNN_IMAGE[1]}x{CNN_IMAGE[2]} images, global batch {2 * CNN_BATCH}",
            )
        elif args.only == "pipeline_ddp":
            runs = run_benchmark(args, Path(folder), False, args.repeats, args.steps, args.warmup)
            report_correctness(runs)
            report_pair(
                runs, runs, PIPELINE_DDP_BATCH, f"wide MLP, global batch {PIPELINE_DDP_BATCH}, 4 processes on 2 cores"
            )
        else:
            runs = run_benchmark(args, Path(folder), False, args.repeats, args.steps, args.warmup)
            report_pair(runs, runs, CNN_BATCH, "resnet18, batch 32 per process: samples/s of one process")
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
