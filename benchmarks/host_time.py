"""Host microseconds a training step on CPU, over batches already in memory: a plain loop, a bare Lightning Trainer
and the template as shipped, with what each part of the template costs (docs/performance/overhead.md).

    python -m benchmarks.host_time [--repeats 5] [--steps 200] [--json PATH]

The model is the staged MLP of configs/mlp.yaml shrunk to 784-16-10, batch 8, so that the kernels take little of a
step and the host's work is most of it: on a GPU that host work is what the GPU waits for when a step is short. Each
case runs in this process and is timed over `--steps` steps after 20 warm-up steps, from one step's start to a later
step's start (log steps included; start-up, the epoch's end and the run's end left out), in the process's CPU time
(`time.process_time`, all its threads): the host's work, which time the process waits descheduled on a shared machine
does not inflate as it does the wall clock (docs/performance/overhead.md says which figures were wall time). Each case
starts with what the process holds collected and frozen (`gc.freeze`): Python's full collection, when it falls
inside a case's timed steps, walks every object the earlier cases and the imports left (half a million, some 0.2 s,
600 us a step over 300 steps) and charges it to that case; frozen, a collection walks only the case's own. The
cases alternate their order in each repeat (benchmarks/alternation.py); the figures are the median and range over
repeats, and a ratio is the median of the per-repeat ratios; the last column divides each case's fastest repeat by
bare Lightning's, the figure least moved by other work on a shared machine, which only ever adds time.

Cases:
- plain loop: forward, loss, backward, Adam step and the accuracy update of `training_step`, by hand.
- bare Lightning: `Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False,
  enable_model_summary=False)` on the same module, Lightning's own parity settings.
- template: `cli.py fit --config configs/mlp.yaml` as shipped (progress bar, CSV logger, every callback), on the
  in-memory batches; each "without X" case leaves one part out, so its difference to the template is X's cost
  ("without redraw limit": the progress bar redrawn at every batch, as Lightning's is; "without NoProfiler": with
  Lightning's default profiler, which the template replaces; "without Throughput": with one that does nothing in its
  place, as the template adds one to every run; "without Throughput's direct writes": its values also handed to
  `self.log`, as before the template wrote them to the loggers directly; "without idle-hook skip": every callback's
  every per-batch hook called, as Lightning does, instead of only those a callback overrides; "without resumable
  loader": the training loader left as the datamodule returns it, no resumable sampler and no per-sample seeding).
"""

import argparse
import contextlib
import gc
import io
import json
import os
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the repository root, for `import cli`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
import torch.nn.functional as F
import yaml
from lightning.pytorch import Callback, LightningDataModule, Trainer
from lightning.pytorch.profilers import PassThroughProfiler
from torch.utils.data import DataLoader
from typing_extensions import override

import cli
from benchmarks.alternation import in_turn
from lightning_modules.mlp_classifier import MLPClassifier
from trainrig.monitoring.idle_hooks import BATCH_HOOKS
from trainrig.monitoring.log_steps import is_log_step
from trainrig.monitoring.throughput import Throughput

ROOT = Path(__file__).resolve().parents[1]
WARM_STEPS = 20
BATCH = 8
NUM_CLASSES = 10
HIDDEN = [16]


class InMemoryBatches(LightningDataModule):
    """Random 28x28 images and labels held as tensors: loading costs nothing but the loader's own bookkeeping."""

    model_arguments = ("num_classes", "input_size")
    num_classes = NUM_CLASSES
    input_size = 28 * 28

    def __init__(self, samples: int = 4096, batch_size: int = BATCH) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        images = torch.rand(samples, 1, 28, 28, generator=generator)
        labels = torch.randint(NUM_CLASSES, (samples,), generator=generator)
        self.samples = list(zip(images, labels))
        self.batch_size = batch_size

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.samples, batch_size=self.batch_size, shuffle=True)


class PositionKeepingLoader(DataLoader):
    """A loader that says it keeps its own position, so that the template leaves it as it is
    (trainrig/resume/data_order.py): the case "template without resumable loader", a plain DataLoader with no
    resumable sampler and no per-sample seeding."""

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


class InMemoryBatchesLeftAlone(InMemoryBatches):
    @override
    def train_dataloader(self) -> DataLoader:
        return PositionKeepingLoader(self.samples, batch_size=self.batch_size, shuffle=True)


class LightningDefaultProfiler(PassThroughProfiler):
    """Lightning's default profiler under another name, which the template keeps as a profiler the config chose: the
    case "template without NoProfiler" (trainrig/monitoring/hook_profiler.py)."""


class NoThroughput(Throughput):
    """A Throughput that measures and logs nothing: listed in the config, it keeps the template from adding the real
    one (trainrig/monitoring/throughput.py), for the case "template without Throughput"."""

    @override
    def on_train_start(self, trainer, pl_module) -> None:
        pass

    @override
    def on_train_epoch_start(self, trainer, pl_module) -> None:
        pass

    @override
    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        pass

    @override
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        pass


class ThroughputThroughLog(Throughput):
    """The Throughput that also hands its values to `self.log` at each log step, as the template's did before it wrote
    to the loggers directly: the case "template without Throughput's direct writes" (3 `log` calls a log step)."""

    @override
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
        if is_log_step(trainer):
            for name, value in self.latest.items():
                pl_module.log(name, value, on_step=True, on_epoch=False)


class EveryHookCalled(Callback):
    """Gives back every per-batch hook the template set aside on the run's callbacks
    (trainrig/monitoring/idle_hooks.py), so that Lightning calls each, as it does by default: the case "template
    without idle-hook skip"."""

    @override
    def setup(self, trainer, pl_module, stage) -> None:
        for callback in trainer.callbacks:
            for name in BATCH_HOOKS:
                if vars(callback).get(name, ...) is None:
                    del vars(callback)[name]


class StepClock(Callback):
    """Times the steps from the start of step `WARM_STEPS` to the start of step `WARM_STEPS + steps`."""

    seconds: float = 0.0

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.start = 0.0

    @override
    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if trainer.global_step == WARM_STEPS:
            self.start = time.process_time()
        elif trainer.global_step == WARM_STEPS + self.steps:
            StepClock.seconds = time.process_time() - self.start


def model() -> MLPClassifier:
    torch.manual_seed(0)
    return MLPClassifier(num_classes=NUM_CLASSES, hidden_sizes=tuple(HIDDEN))


def plain_loop(steps: int) -> float:
    network = model()
    optimizer = torch.optim.Adam(network.parameters(), lr=1e-3)
    loader = InMemoryBatches().train_dataloader()
    done, start = 0, 0.0
    while True:
        for images, labels in loader:
            if done == WARM_STEPS:
                start = time.process_time()
            elif done == WARM_STEPS + steps:
                return time.process_time() - start
            logits = network(images)
            loss = F.cross_entropy(logits, labels)
            network.train_metrics.update(logits, labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            done += 1


def bare_lightning(steps: int) -> float:
    trainer = Trainer(
        max_steps=WARM_STEPS + steps + 1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        limit_val_batches=0,
        callbacks=[StepClock(steps)],
    )
    trainer.fit(model(), datamodule=InMemoryBatches())
    return StepClock.seconds


def template_config(folder: Path, leave_out: str | None) -> Path:
    """configs/mlp.yaml on the in-memory batches, without validation, less the part `leave_out` names."""
    config = yaml.safe_load((ROOT / "configs" / "mlp.yaml").read_text())
    config["data"] = {"class_path": "benchmarks.host_time.InMemoryBatches"}
    config["model"]["init_args"]["hidden_sizes"] = HIDDEN
    trainer = config["trainer"]
    trainer.update(limit_val_batches=0, num_sanity_val_steps=0, default_root_dir=str(folder))
    trainer["logger"]["init_args"]["save_dir"] = str(folder)
    if leave_out == "logger":  # LearningRateMonitor refuses a trainer without a logger
        trainer["logger"] = False
        leave_out = "LearningRateMonitor"
    if leave_out == "progress bar":
        trainer["enable_progress_bar"] = False
    elif leave_out == "NoProfiler":
        trainer["profiler"] = {"class_path": "benchmarks.host_time.LightningDefaultProfiler"}
    elif leave_out == "redraw limit":  # the bar redrawn at every batch, as Lightning's is
        bar = {"class_path": "trainrig.monitoring.progress_bar.LogStepProgressBar", "init_args": {"min_interval_s": 0}}
        trainer["callbacks"] = [*trainer["callbacks"], bar]
    elif leave_out == "Throughput":
        trainer["callbacks"] = [*trainer["callbacks"], {"class_path": "benchmarks.host_time.NoThroughput"}]
    elif leave_out == "resumable loader":
        config["data"] = {"class_path": "benchmarks.host_time.InMemoryBatchesLeftAlone"}
    elif leave_out == "idle-hook skip":
        trainer["callbacks"] = [*trainer["callbacks"], {"class_path": "benchmarks.host_time.EveryHookCalled"}]
    elif leave_out == "Throughput's direct writes":
        trainer["callbacks"] = [*trainer["callbacks"], {"class_path": "benchmarks.host_time.ThroughputThroughLog"}]
    elif leave_out is not None:
        trainer["callbacks"] = [c for c in trainer["callbacks"] if not c["class_path"].endswith("." + leave_out)]
    name = (leave_out or "shipped").replace(" ", "_").replace("'", "")
    path = folder / f"mlp_{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def template(config: Path, steps: int) -> float:
    clock = json.dumps({"class_path": "benchmarks.host_time.StepClock", "init_args": {"steps": steps}})
    args = [
        "--trainer.max_steps",
        str(WARM_STEPS + steps + 1),
        "--trainer.max_epochs",
        "-1",
        "--trainer.callbacks+",
        clock,
    ]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        cli.main(["fit", "--config", str(config), *args])
    return StepClock.seconds


def cases(folder: Path) -> dict:
    parts = [
        "logger",
        "progress bar",
        "redraw limit",
        "NoProfiler",
        "Throughput",
        "Throughput's direct writes",
        "idle-hook skip",
        "resumable loader",
        "ResumableCheckpoint",
        "ModelCheckpoint",
        "EpochProgress",
        "ConfusionMatrix",
    ]
    found = {
        "plain loop": plain_loop,
        "bare Lightning": bare_lightning,
        "template": partial(template, template_config(folder, None)),
    }
    for part in parts:
        found[f"template without {part}"] = partial(template, template_config(folder, part))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as folder:
        runs = cases(Path(folder))
        times: dict[str, list[float]] = {name: [] for name in runs}
        for repeat in range(args.repeats):
            for name in in_turn(runs, repeat):
                gc.collect()
                gc.freeze()
                try:
                    times[name].append(runs[name](args.steps) / args.steps * 1e6)
                finally:
                    gc.unfreeze()
            print(f"repeat {repeat + 1}/{args.repeats} done", file=sys.stderr)
    bare = times["bare Lightning"]
    rows = []
    for name, values in times.items():
        ratios = [value / reference for value, reference in zip(values, bare)]
        rows.append(
            {
                "case": name,
                "us_per_step": statistics.median(values),
                "range": [min(values), max(values)],
                "over_bare_lightning": statistics.median(ratios),
                "ratio_range": [min(ratios), max(ratios)],
                "best_over_bare_best": min(values) / min(bare),
            }
        )
    print(
        "| case | host us a step (median, range) | / bare Lightning (range) | best / bare Lightning's best |\n"
        "|---|---:|---:|---:|"
    )
    for row in rows:
        low, high = row["range"]
        print(
            f"| {row['case']} | {row['us_per_step']:.0f} ({low:.0f}-{high:.0f}) | "
            f"{row['over_bare_lightning']:.2f}x ({row['ratio_range'][0]:.2f}-{row['ratio_range'][1]:.2f}) | "
            f"{row['best_over_bare_best']:.2f}x |"
        )
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "steps": args.steps, "cpus": os.cpu_count()}, indent=2))


if __name__ == "__main__":
    from benchmarks import host_time  # the module the template's class paths name, not this copy as __main__

    host_time.main()
