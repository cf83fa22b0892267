"""The template's cost over a plain PyTorch loop doing the same work, for each example, and where that cost lies.

    python benchmarks/overhead.py --device cpu --json overhead_cpu.json
    python benchmarks/overhead.py --device cuda --precision bf16-mixed --time-limit 170 --json overhead_cuda.json
    python benchmarks/overhead.py --quick --device cpu --json /tmp/overhead_quick.json  # a rehearsal, ~2 minutes

Every case is built from the example's config (configs/EXAMPLE.yaml) at this script's data sizes and runs in this
process, one after the other:

template: the real training path, `cli.main(["fit", "--config", ...])` as the tests run it, with
    `--trainer.enable_progress_bar false` and its logger writing to a temporary folder; the main comparisons also
    run it as a user does, with the progress bar on ("template, progress bar on").
plain loop: the same LightningModule used as an nn.Module, built from the same config (same seed, weights and
    optimizer settings), trained on the datamodule's own training set after `setup` through
    `torch.utils.data.DataLoader(shuffle=True)` at the template loader's batch size, workers and collate step, with
    the same torchmetrics updates each step and computes at each epoch's end, and the config's scheduler stepped
    as the template steps it (the CNN's OneCycleLR every batch); for train + validate the same validation pass. On
    cuda it moves model and batches there; bf16-mixed runs the steps under torch.autocast(dtype=torch.bfloat16).

Train only is `--trainer.limit_val_batches 0` and drops the config's scheduler (a ReduceLROnPlateau would need
`val/loss`), for both; it also runs the template without the config's checkpoint callbacks and Lightning's
checkpointing, so that what the template's machinery costs shows apart from the checkpoints the config writes at
each epoch's end, which the plain loop does not. The breakdown (train + validate) runs beside the template: a plain
Lightning Trainer (no logger, checkpointing or callbacks) fitting the example's LightningModule and the template's
datamodule; the template bare (no config callbacks, logger or checkpointing: what trainrig/ always adds, its
resumable loader included); the template without its logger (and LearningRateMonitor, which needs one); without each
config callback in turn. The loader comparisons iterate the batches alone, on CPU: `DataLoader(train_set,
shuffle=True)` against the datamodule's resumable `train_dataloader()` at the same settings, with and without
augmentation, with 0 and 2 workers. --quick leaves out the breakdown's single callbacks and all loader settings but
2 workers with augmentation.

Epoch time is by difference: (a run of --epochs epochs - a run of 1 epoch) / (--epochs - 1), so start-up and data
generation drop out; cuda is synchronized before the clock is read, and one untimed epoch of each example first
generates its data and warms the process up. The cases of a comparison alternate order on each repeat (A B, then
B A); ratios are the median of the per-repeat ratios to the comparison's first case, with their range. No case
starts after --time-limit seconds; the JSON (rewritten after each comparison) holds what finished, and a case that
fails is recorded with its error while the others go on. SIGTERM or Ctrl-C stops the benchmark and deletes its
temporary folder (every template run's checkpoints and logs).
"""

import argparse
import datetime
import gc
import json
import logging
import os
import platform
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import warnings
from contextlib import nullcontext
from pathlib import Path
from types import SimpleNamespace

import torch
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import lightning  # noqa: E402
from lightning.pytorch import Trainer  # noqa: E402
from torch.nn import functional as F  # noqa: E402
from torch.optim.lr_scheduler import ReduceLROnPlateau  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

import cli  # noqa: E402
from benchmarks.alternation import in_turn  # noqa: E402
from benchmarks.provenance import git_commit  # noqa: E402
from lightning_modules.name_generator import NameGenerator  # noqa: E402
from trainrig.cli.template_cli import TemplateCLI  # noqa: E402
from trainrig.resume.preemption import received_stop  # noqa: E402

EXAMPLES = ("cnn", "lstm", "mlp")
# The parts of the benchmark, in the order they run: `--parts` picks some, so that each fits a time limit alone.
PARTS = ("main", "breakdown", "loader")
# Data sizes (config overrides) for --quick: a few batches of small images or a few hundred names.
QUICK_SIZES = {
    "cnn": ["--data.init_args.images_per_class", "10", "--data.init_args.canvas_size", "16"]
    + ["--data.init_args.image_size", "16"],
    "mlp": ["--data.init_args.images_per_class", "100"],
}
QUICK_NAMES = 300
LOADER_WORKERS = (0, 2)
STOPPING = threading.Event()  # set by the first SIGTERM or SIGINT
TRAIN_ONLY = ["--trainer.limit_val_batches", "0", "--model.init_args.scheduler", "null"]


def build_example(config_args: list[str]):
    """The example's LightningModule and datamodule as the template builds them from the config (seeded alike)."""
    built = TemplateCLI(
        job=cli.run,
        data_to_model_links=cli.DATA_TO_MODEL_LINKS,
        trainer_defaults=cli.TRAINER_DEFAULTS,
        save_config_callback=None,
        args=[*config_args, "--trainer.logger", "false", "--trainer.accelerator", "cpu"],
        run=False,
    )
    return built.model, built.datamodule


def datasets(datamodule):
    """The datamodule's own training and validation sets after `setup`."""
    datamodule.prepare_data()
    datamodule.setup("fit")
    if hasattr(datamodule, "train_examples"):  # the pet names
        return datamodule.train_examples, datamodule.val_examples
    return datamodule.train_set, datamodule.val_set


def plain_loader(dataset, like: DataLoader, shuffle: bool) -> DataLoader:
    """A plain DataLoader with the batch size, workers and collate step of the template's loader `like`."""
    return DataLoader(
        dataset,
        batch_size=like.batch_size,
        shuffle=shuffle,
        num_workers=like.num_workers,
        persistent_workers=like.persistent_workers,
        collate_fn=like.collate_fn,
    )


def step_loss(model, batch, stage: str) -> torch.Tensor:
    """The loss of one batch, with the metric updates the example's training or validation step makes."""
    if isinstance(model, NameGenerator):
        loss, logits, targets = model.batch_loss(batch)
        if stage == "val":
            model.val_perplexity.update(logits, targets)
        return loss
    images, labels = batch
    logits = model(images)
    if stage == "train":
        model.train_metrics.update(logits, labels)
    else:
        model.val_metrics.update(logits, labels)
        model.val_confidence.update(logits.softmax(dim=-1).amax(dim=-1))
    return F.cross_entropy(logits, labels)


def compute_epoch_metrics(model, stage: str) -> None:
    """The epoch-end work of the template's metric logging: compute each of the stage's metrics, then reset it."""
    names = ("train_metrics",) if stage == "train" else ("val_metrics", "val_confidence", "val_perplexity")
    for metric in (getattr(model, name) for name in names if hasattr(model, name)):
        metric.compute()
        metric.reset()


def run_epoch(
    model, loader, stage: str, device: torch.device, precision: str, optimizer=None, step_scheduler=None
) -> torch.Tensor:
    """One pass over `loader`; trains when given the optimizer, stepping `step_scheduler` (a per-step schedule such as
    the CNN's OneCycleLR) after each optimizer step. Returns the mean loss."""
    autocast = torch.autocast(device.type, dtype=torch.bfloat16) if precision == "bf16-mixed" else nullcontext()
    model.train(stage == "train")
    losses = []
    with torch.set_grad_enabled(stage == "train"):
        for batch in loader:
            batch = tuple(tensor.to(device, non_blocking=True) for tensor in batch)
            with autocast:
                loss = step_loss(model, batch, stage)
            if optimizer is not None:
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                if step_scheduler is not None:
                    step_scheduler.step()
            losses.append(loss.detach())
    compute_epoch_metrics(model, stage)
    return torch.stack(losses).mean()


def plain_loop(config_args: list[str], epochs: int, validate: bool, device: torch.device, precision: str) -> None:
    model, datamodule = build_example(config_args)
    train_set, val_set = datasets(datamodule)
    template_loader = datamodule.train_dataloader()
    train_loader = plain_loader(train_set, template_loader, shuffle=True)
    val_loader = plain_loader(val_set, template_loader, shuffle=False) if validate else None
    model.to(device)
    # What a per-step schedule given no `total_steps` asks the trainer for (lightning_modules/optimization.py).
    model.trainer = SimpleNamespace(estimated_stepping_batches=epochs * len(train_loader))
    optimization = model.configure_optimizers()
    model.trainer = None
    optimizer, scheduler, interval = optimization, None, None
    if isinstance(optimization, dict):
        optimizer, scheduler = optimization["optimizer"], optimization["lr_scheduler"]["scheduler"]
        interval = optimization["lr_scheduler"]["interval"]
    step_scheduler = scheduler if interval == "step" else None
    for _ in range(epochs):
        run_epoch(model, train_loader, "train", device, precision, optimizer, step_scheduler)
        val_loss = run_epoch(model, val_loader, "val", device, precision) if validate else None
        if isinstance(scheduler, ReduceLROnPlateau):
            if val_loss is not None:
                scheduler.step(val_loss)
        elif scheduler is not None and step_scheduler is None:
            scheduler.step()


def plain_trainer(config_args: list[str], epochs: int, device: torch.device, precision: str) -> None:
    model, datamodule = build_example(config_args)
    trainer = Trainer(
        accelerator="gpu" if device.type == "cuda" else "cpu",
        devices=1,
        precision=precision,
        max_epochs=epochs,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        callbacks=[],
    )
    trainer.fit(model, datamodule)


def iterate_loader(config_args: list[str], epochs: int, resumable: bool) -> None:
    _, datamodule = build_example(config_args)
    train_set, _ = datasets(datamodule)
    template_loader = datamodule.train_dataloader()
    loader = template_loader if resumable else plain_loader(train_set, template_loader, shuffle=True)
    for epoch in range(epochs):
        if resumable:
            loader.sampler.set_epoch(epoch)  # as the trainer does
        for _ in loader:
            pass


def timed_run(case: dict, epochs: int) -> float:
    """Seconds one run of the case takes in this process, its garbage from earlier runs collected first."""
    device = torch.device(case["device"])
    gc.collect()
    try:
        start = time.perf_counter()
        if case["kind"] == "template":
            cli.main([*case["args"], "--trainer.max_epochs", str(epochs)])
        elif case["kind"] == "plain loop":
            plain_loop(case["args"], epochs, case["validate"], device, case["precision"])
        elif case["kind"] == "plain trainer":
            plain_trainer(case["args"], epochs, device, case["precision"])
        else:
            iterate_loader(case["args"], epochs, case["kind"] == "resumable loader")
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - start
    finally:
        if "output" in case:  # a template run's checkpoints and logs: ~270 MB for the CNN, also of a failed run
            shutil.rmtree(case["output"], ignore_errors=True)


def template_overrides(config: Path, folder: Path, output: Path, each_callback: bool) -> dict[str, Path]:
    """Per template variant, a config file in `folder` laid over the example's: the full template (its logger
    writing to `output`), bare, without the logger, and, with `each_callback`, without each config callback in
    turn."""
    trainer = yaml.safe_load(config.read_text())["trainer"]
    logger = {**trainer["logger"], "init_args": {**trainer["logger"]["init_args"], "save_dir": str(output)}}
    callbacks = trainer["callbacks"]
    variants = {
        "template": {},
        "template bare": {"callbacks": [], "logger": False, "enable_checkpointing": False},
        # What the template costs besides the config's checkpoints (a plain loop writes none): the same run, no
        # checkpoint written.
        "template without checkpoints": {
            "callbacks": [callback for callback in callbacks if not callback["class_path"].endswith("Checkpoint")],
            "enable_checkpointing": False,
        },
        # LearningRateMonitor refuses a trainer without a logger.
        "template without logger, LearningRateMonitor": {
            "logger": False,
            "callbacks": [
                callback for callback in callbacks if not callback["class_path"].endswith("LearningRateMonitor")
            ],
        },
    }
    for index, callback in enumerate(callbacks if each_callback else []):
        name = callback["class_path"].rsplit(".", 1)[1]
        variants[f"template without {name}"] = {"callbacks": callbacks[:index] + callbacks[index + 1 :]}
    paths = {}
    for variant, changes in variants.items():
        paths[variant] = folder / f"{config.stem}-{variant.replace(' ', '-')}.yaml"
        paths[variant].write_text(yaml.safe_dump({"trainer": {"logger": logger, **changes}}))
    return paths


def example_sizes(example: str, settings: dict, folder: Path) -> list[str]:
    """Config overrides that set the data sizes: --quick's small images, or the first names of the pet names."""
    if example != "lstm":
        return QUICK_SIZES[example] if settings["quick"] else []
    names = settings["lstm_names"]
    if not names:
        return []
    subset = folder / f"pet_names_{names}.txt"
    lines = (ROOT / "data" / "pet_names.txt").read_text(encoding="utf-8").splitlines()
    subset.write_text("\n".join(lines[:names]) + "\n", encoding="utf-8")
    return ["--data.init_args.names_path", str(subset)]


def comparisons(example: str, sizes: list[str], settings: dict, folder: Path) -> list[dict]:
    """The example's comparisons: each has its part (one of PARTS) and its cases, the first being the baseline,
    each what `timed_run` needs but the number of epochs."""
    config, output = ROOT / "configs" / f"{example}.yaml", folder / "output"
    overrides = template_overrides(config, folder, output, each_callback=not settings["quick"])
    device, precision = settings["device"], settings["precision"]
    built = ["--config", str(config), *sizes]
    run_settings = {"device": device, "precision": precision}
    template_flags = [
        *("--trainer.accelerator", "gpu" if device == "cuda" else "cpu", "--trainer.devices", "1"),
        *("--trainer.precision", precision, "--trainer.enable_progress_bar", "false"),
        *("--trainer.default_root_dir", str(output)),
    ]

    def template(variant: str, extra: list[str] = ()) -> dict:
        args = ["fit", *built, "--config", str(overrides[variant]), *template_flags, *extra]
        return {"kind": "template", "args": args, "output": str(output), **run_settings}

    def plain(kind: str, extra: list[str] = (), validate: bool = True) -> dict:
        return {"kind": kind, "args": [*built, *extra], "validate": validate, **run_settings}

    # As a user runs it: the template's progress bar on (its redraws, the values it reads at log steps).
    bar_on = ["--trainer.enable_progress_bar", "true"]
    train_only = {"plain loop": plain("plain loop", TRAIN_ONLY, validate=False)}
    train_only["template"] = template("template", TRAIN_ONLY)
    train_only["template without checkpoints"] = template("template without checkpoints", TRAIN_ONLY)
    train_only["template, progress bar on"] = template("template", [*TRAIN_ONLY, *bar_on])
    train_and_validate = {"plain loop": plain("plain loop"), "template": template("template")}
    train_and_validate["template, progress bar on"] = template("template", bar_on)
    breakdown = {"template": template("template"), "plain Lightning Trainer": plain("plain trainer")}
    breakdown |= {variant: template(variant) for variant in overrides if variant != "template"}
    loaders, quick = [], settings["quick"]
    augments = (None,) if example == "lstm" else ("true",) if quick else ("false", "true")
    for workers in (2,) if quick else LOADER_WORKERS:
        for augment in augments:
            data = ["--data.init_args.num_workers", str(workers)]
            data += ["--data.init_args.augment", augment] if augment else []
            cases = {
                "DataLoader(shuffle=True)": {"kind": "plain loader", "args": [*built, *data], "device": "cpu"},
                "resumable loader": {"kind": "resumable loader", "args": [*built, *data], "device": "cpu"},
            }
            name = f"loader alone (cpu), {workers} workers" + (f", augment {augment}" if augment else "")
            loaders.append({"part": "loader", "name": name, "cases": cases})
    return [
        {"part": "main", "name": "train only", "cases": train_only},
        {"part": "main", "name": "train + validate", "cases": train_and_validate},
        {"part": "breakdown", "name": "breakdown, train + validate", "cases": breakdown},
        *loaders,
    ]


def epoch_seconds(case: dict, epochs: int) -> float:
    """(a run of `epochs` epochs - a run of 1 epoch) / (`epochs` - 1)."""
    return (timed_run(case, epochs) - timed_run(case, 1)) / (epochs - 1)


def spread(values: list[float]) -> dict | None:
    """Median and range of `values` (the per-repeat figures, also given); None for none."""
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "values": values}


def run_comparison(comparison: dict, repeats: int, epochs: int, deadline: float) -> dict:
    """Each case's epoch seconds and ratio to the first case, over the repeats in which it ran; a case that fails
    is recorded and left out of later repeats."""
    names = list(comparison["cases"])
    finished, failed = [], {}
    for repeat in range(repeats):
        seconds = {}
        for name in in_turn(names, repeat):
            if time.monotonic() > deadline:
                break
            if name in failed:
                continue
            try:
                seconds[name] = epoch_seconds(comparison["cases"][name], epochs)
            except (Exception, SystemExit) as error:  # a refused run exits with its status
                raise_if_stopping(error)
                failed[name] = f"{type(error).__name__}: {error}".splitlines()[0]
                print(f"  {name} failed: {failed[name]}")
        if seconds:
            finished.append(seconds)
            print(f"  repeat {repeat + 1}: " + ", ".join(f"{name} {value:.3f} s" for name, value in seconds.items()))
        if time.monotonic() > deadline:
            break
    baseline = names[0]
    ran = [name for name in names if any(name in seconds for seconds in finished)]
    paired = [seconds for seconds in finished if baseline in seconds]
    return {
        "example": comparison["example"],
        "comparison": comparison["name"],
        "baseline": baseline,
        "epoch_seconds": {name: spread([seconds[name] for seconds in finished if name in seconds]) for name in ran},
        "ratio_to_baseline": {
            name: spread([seconds[name] / seconds[baseline] for seconds in paired if name in seconds]) for name in ran
        },
        "failed": failed,
    }


def stop(signum: int, frame) -> None:
    """SIGTERM (`timeout`, the end of a loan) and Ctrl-C end the benchmark through the `finally` that deletes its
    temporary folder, which holds tens of GB after a while."""
    STOPPING.set()
    raise KeyboardInterrupt


def raise_if_stopping(error: BaseException) -> None:
    """Re-raise a case's `error` when a signal asked the benchmark to stop: Lightning turns Ctrl-C into
    `sys.exit(1)`, and a template run turns SIGTERM and SIGINT into a checkpoint and `Preempted`; neither is a
    failure of the case."""
    if STOPPING.is_set() or received_stop() is not None:
        raise error


def warm_up(cases: dict) -> None:
    """One untimed epoch of each case: generates the example's data and pays what a process does only once (lazy
    imports, first allocations), so that no measured run pays it. A failure shows again when the case is measured."""
    for name, case in cases.items():
        try:
            timed_run(case, 1)
        except (Exception, SystemExit) as error:
            raise_if_stopping(error)
            print(f"  warm-up of {name} failed: {type(error).__name__}: {error}".splitlines()[0])


def device_name(device: str) -> str:
    if device == "cuda":
        return torch.cuda.get_device_name()
    cpu = next((line for line in Path("/proc/cpuinfo").read_text().splitlines() if "model name" in line), "")
    return f"{cpu.split(':')[-1].strip() or platform.processor()}, {os.cpu_count()} cores"


def print_table(results: list[dict]) -> None:
    print("\n| example | comparison | case | epoch (s), median | vs the first case, median (range) | repeats |")
    print("|---|---|---|---:|---:|---:|")
    for result in results:
        for name, seconds in result["epoch_seconds"].items():
            ratio = result["ratio_to_baseline"][name]
            versus = f"{ratio['median']:.2f}x ({ratio['min']:.2f} to {ratio['max']:.2f})" if ratio else ""
            print(
                f"| {result['example']} | {result['comparison']} | {name} | {seconds['median']:.3f} | {versus} | "
                f"{len(seconds['values'])} |"
            )
        for name, error in result["failed"].items():
            print(f"| {result['example']} | {result['comparison']} | {name} | failed: {error} | | |")


def main() -> None:
    for name in ("lightning.pytorch", "lightning.fabric"):  # each run's start-up lines and model summary
        logging.getLogger(name).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message="The `srun` command is available")  # each run's, on a SLURM machine
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", default=",".join(EXAMPLES), help="comma-separated subset of cnn,lstm,mlp")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--precision", choices=("32-true", "bf16-mixed"), default="32-true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=3, help="the long run's epochs; the short run has 1")
    parser.add_argument("--lstm-names", type=int, default=6000, help="pet names the LSTM trains on (0: all)")
    parser.add_argument(
        "--quick", action="store_true", help="a rehearsal: tiny data, 2 epochs against 1, 1 repeat, fewer cases"
    )
    parser.add_argument(
        "--parts", default=",".join(PARTS), help="comma-separated subset of main,breakdown,loader (default: all)"
    )
    parser.add_argument("--time-limit", type=float, help="seconds; no case starts after")
    parser.add_argument("--json", type=Path, help="write every figure here")
    args = parser.parse_args()
    examples = args.examples.split(",")
    if unknown := set(examples) - set(EXAMPLES):
        parser.error(f"unknown examples {sorted(unknown)}; choose from {','.join(EXAMPLES)}")
    parts = args.parts.split(",")
    if unknown := set(parts) - set(PARTS):
        parser.error(f"unknown parts {sorted(unknown)}; choose from {','.join(PARTS)}")
    if args.quick:
        args.epochs, args.repeats, args.lstm_names = 2, 1, QUICK_NAMES
    if args.epochs < 2:
        parser.error("--epochs must be at least 2: epoch time is the difference to a 1-epoch run")
    settings = {
        "device": args.device,
        "precision": args.precision,
        "repeats": args.repeats,
        "epochs": args.epochs,
        "quick": args.quick,
        "lstm_names": args.lstm_names,
    }
    deadline = time.monotonic() + (args.time_limit or float("inf"))
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, stop)
    report = {
        "device": device_name(args.device),
        "torch": torch.__version__,
        "lightning": lightning.__version__,
        "commit": git_commit(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "settings": {**settings, "examples": examples, "parts": parts, "time_limit": args.time_limit},
        "results": [],
        "not_started": [],
    }
    with tempfile.TemporaryDirectory() as temporary:
        folder, plan, unwarmed = Path(temporary), [], {}
        for example in examples:
            example_comparisons = comparisons(example, example_sizes(example, settings, folder), settings, folder)
            plan += [
                {**comparison, "example": example} for comparison in example_comparisons if comparison["part"] in parts
            ]
            unwarmed[example] = next(c["cases"] for c in example_comparisons if c["name"] == "train + validate")
        plan.sort(key=lambda comparison: PARTS.index(comparison["part"]))  # every example's main comparisons first
        for comparison in plan:
            if comparison["example"] in unwarmed and time.monotonic() < deadline:
                warm_up(unwarmed.pop(comparison["example"]))
            print(f"{comparison['example']}: {comparison['name']}", flush=True)
            result = run_comparison(comparison, args.repeats, args.epochs, deadline)
            if result["epoch_seconds"] or result["failed"]:
                report["results"].append(result)
            else:
                report["not_started"].append(f"{comparison['example']}: {comparison['name']}")
            if args.json:
                args.json.write_text(json.dumps(report, indent=2))
    print_table(report["results"])
    if any(seconds["min"] <= 0 for result in report["results"] for seconds in result["epoch_seconds"].values()):
        print("\nan epoch of 0 s or less: the machine's noise exceeded the epochs' cost; raise --epochs or quieten it")
    if report["not_started"]:
        print(f"\nnot started within --time-limit {args.time_limit:.0f} s: {'; '.join(report['not_started'])}")
    print(f"\n{report['device']}, torch {report['torch']}, Lightning {report['lightning']}, {report['commit']}")


if __name__ == "__main__":
    main()
