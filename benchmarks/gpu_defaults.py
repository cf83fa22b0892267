"""The GPU defaults a config could choose, each measured against its baseline in one run, as samples per second.

    python benchmarks/gpu_defaults.py --json gpu_defaults.json                       # ~2 minutes on an H100
    python benchmarks/gpu_defaults.py --quick --device cpu --json /tmp/gpu_defaults_quick.json   # CPU rehearsal

Why: the configs are written for a laptop's CPU (32-bit floats, small batches, few loader workers); this says which
of the settings a GPU config could change pays, and by how much, on the examples themselves. Measured, per example:

- precision: `--trainer.precision bf16-mixed` against `32-true` (cnn, mlp, lstm);
- compile: `--trainer.strategy single_device --trainer.strategy.init_args.compile true` (inductor) against eager, in
  32-true (cnn, mlp). The compile seconds (the first batches' extra time over the eager run of the same repeat) are
  counted apart from the steady throughput: the first compiled run of the benchmark starts from an empty inductor
  cache, later ones find its FX graphs (as a user's second run does) after `torch._dynamo.reset()`;
- memory format: `channels_last` model and input against contiguous, in 32-true and under bf16 autocast (cnn). The
  template has no option for it, so this runs the example's own model, optimizer and batches in a plain loop
  (forward, cross-entropy, backward, step), not through the Trainer;
- loader: `num_workers` 0 against each of `--workers`, each with `pin_memory` off and on (cnn, mlp). The datamodules
  have no pin_memory option: the benchmark sets it on the training DataLoader they build.

Every case except the memory format runs `cli.py fit` in this process (TemplateCLI with the example's config and
`--trainer.accelerator gpu --trainer.devices 1 --trainer.precision ... --trainer.limit_train_batches N
--trainer.limit_val_batches 0 --trainer.enable_progress_bar false`), one epoch. Throughput counts the batches after
the first `--warmup` ones, the device synchronized at both ends (EpochTimer, benchmarks/epoch_timer.py, times the
whole epoch: it would count compilation, CUDA start-up and the loader's first batches).

Batches. Precision, compile and memory format replay 4 batches drawn from the example's own training loader,
held in (pinned) memory, at a GPU-sized batch: 256 images for the cnn (the config's 32 leaves an H100 waiting on
kernel launches and Lightning's per-step work, so a model-side setting would hardly show), 512 for the mlp, 16384
windows for the lstm (configs/lstm_reference.yaml's GPU batch). Replayed, the loader cannot cap those figures; the
loader cases show what the loader allows: they run the config as shipped (its data set and batch, 32 images for
the cnn, 100 for the mlp) through its real DataLoader, `--loader-batches` batches of one epoch.

Each repeat runs every case of a comparison back to back, alternating which goes first (A B, then B A), so drifting
machine speed hits both alike; ratios are medians (and ranges) of the per-repeat ratios. The lstm's unit is
names/s: windows/s divided by the training set's windows per name. `--time-limit` stops starting new cases once the
time is spent; the table and the JSON (all runs, device, torch and lightning versions, git commit, date) are
still written. On a CPU, bf16 is measured anyway (autocast), pin_memory does nothing, and `--quick` skips compile
(inductor's C++ build takes minutes on a few cores).
"""

import argparse
import datetime
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import lightning  # noqa: E402
from lightning.pytorch import Callback  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from benchmarks.alternation import in_turn  # noqa: E402
from benchmarks.provenance import git_commit  # noqa: E402
from cli import DATA_TO_MODEL_LINKS, TRAINER_DEFAULTS, run  # noqa: E402
from trainrig.cli.entry import release_job_resources, silence_library_noise  # noqa: E402
from trainrig.cli.template_cli import TemplateCLI  # noqa: E402


@dataclass(frozen=True)
class Example:
    config: str
    batch_size: int  # replayed cases; the loader cases keep the config's
    quick_batch_size: int
    unit: str
    # Flags that leave out what a run without validation cannot do or need not time (the CNN's schedule: the cases
    # time the steps, whose work it does not change).
    without_validation: tuple[str, ...] = ()
    quick_args: tuple[str, ...] = ()


EXAMPLES = {
    "cnn": Example(
        "configs/cnn.yaml",
        256,
        8,
        "images/s",
        without_validation=("--model.init_args.scheduler", "null"),
        quick_args=("--data.init_args.image_size", "32"),
    ),
    "mlp": Example("configs/mlp.yaml", 512, 64, "images/s"),
    "lstm": Example("configs/lstm.yaml", 16384, 512, "names/s"),
}
COMPILED = ("cnn", "mlp")
CHANNELS_LAST = ("cnn",)
LOADER = ("cnn", "mlp")
DISTINCT_BATCHES = 4
BASELINE_PRECISION = "32-true"
BF16 = "bf16-mixed"


@dataclass(frozen=True)
class Case:
    example: str
    comparison: str
    setting: str
    baseline: str | None = None  # the setting of the same comparison this one is divided by; None: the baseline
    precision: str = BASELINE_PRECISION
    compile: bool = False
    channels_last: bool | None = None  # None: through the Trainer; otherwise the plain loop
    workers: int | None = None  # None: replayed batches; otherwise the config's own loader
    pin_memory: bool = False


class StepClock(Callback):
    """Seconds of the epoch's first `warmup` batches and of the batches after them, the device synchronized at the
    start, after the warm-up and after the last batch."""

    def __init__(self, warmup: int):
        self.warmup = warmup

    def on_train_epoch_start(self, trainer, pl_module):
        self.start = synchronized_now(pl_module.device.type)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if batch_idx + 1 == self.warmup:
            self.warm = synchronized_now(pl_module.device.type)
        elif batch_idx + 1 == trainer.num_training_batches:
            self.end = synchronized_now(pl_module.device.type)
            self.timed_batches = batch_idx + 1 - self.warmup


class ReplayedBatches:
    """The same few batches again and again, `length` in all: a training loader the model never waits on."""

    def __init__(self, batches: list, length: int):
        self.batches = batches
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __iter__(self):
        return (self.batches[index % len(self.batches)] for index in range(self.length))


def comparisons(examples: list[str], workers: list[int], with_compile: bool, with_bf16: bool) -> list[list[Case]]:
    """Each comparison's cases, its baseline first."""
    groups = []
    precisions = (BASELINE_PRECISION, BF16) if with_bf16 else (BASELINE_PRECISION,)
    for example in examples:
        model_side = [Case(example, "precision, compile", BASELINE_PRECISION)]
        if with_bf16:
            model_side.append(Case(example, "precision, compile", BF16, BASELINE_PRECISION, precision=BF16))
        if with_compile and example in COMPILED:
            compiled = Case(example, "precision, compile", "32-true, compiled", BASELINE_PRECISION, compile=True)
            model_side.append(compiled)
        groups.append(model_side)
        if example in CHANNELS_LAST:
            for precision in precisions:
                contiguous = f"contiguous, {precision}"
                groups.append(
                    [
                        Case(example, "memory format", contiguous, precision=precision, channels_last=False),
                        Case(
                            example,
                            "memory format",
                            f"channels_last, {precision}",
                            contiguous,
                            precision=precision,
                            channels_last=True,
                        ),
                    ]
                )
        if example in LOADER:
            settings = [(count, pin) for count in [0, *(w for w in workers if w)] for pin in (False, True)]
            groups.append(
                [
                    Case(
                        example,
                        "loader",
                        loader_setting(count, pin),
                        None if (count, pin) == (0, False) else loader_setting(0, False),
                        workers=count,
                        pin_memory=pin,
                    )
                    for count, pin in settings
                ]
            )
    return groups


def loader_setting(workers: int, pin_memory: bool) -> str:
    return f"num_workers {workers}, pin_memory {'on' if pin_memory else 'off'}"


def scheduled_cases(groups: list[list[Case]], repeats: int):
    """(repeat, case) in running order: every comparison's cases back to back, the order reversed every other repeat."""
    for repeat in range(repeats):
        for group in groups:
            for case in in_turn(group, repeat):
                yield repeat, case


def build_cli(case: Case, args, log_dir: str, batches: int) -> TemplateCLI:
    example = EXAMPLES[case.example]
    overrides = [
        *("--trainer.accelerator", "gpu" if args.device == "cuda" else "cpu", "--trainer.devices", "1"),
        *("--trainer.precision", case.precision, "--trainer.max_epochs", "1"),
        *("--trainer.limit_train_batches", str(batches), "--trainer.limit_val_batches", "0"),
        *("--trainer.num_sanity_val_steps", "0", "--trainer.enable_progress_bar", "false"),
        *("--trainer.enable_model_summary", "false", "--trainer.logger.init_args.save_dir", log_dir),
        *example.without_validation,
    ]
    if case.compile:
        overrides += ["--trainer.strategy", "single_device", "--trainer.strategy.init_args.compile", "true"]
    if args.quick:
        overrides += ["--data.init_args.batch_size", str(example.quick_batch_size), *example.quick_args]
    elif case.workers is None:
        overrides += ["--data.init_args.batch_size", str(example.batch_size)]
    overrides += ["--data.init_args.num_workers", str(case.workers or 0)]
    return TemplateCLI(
        job=run,
        data_to_model_links=DATA_TO_MODEL_LINKS,
        trainer_defaults=TRAINER_DEFAULTS,
        save_config_callback=None,
        args=["--config", str(ROOT / example.config), *overrides],
        run=False,
    )


def drawn_batches(datamodule, device: str) -> list:
    """The first full batches of the example's training loader, pinned on a GPU machine as a pinning loader's are."""
    datamodule.prepare_data()
    datamodule.setup("fit")
    batches = []
    for batch in datamodule.train_dataloader():
        if len(batches) == DISTINCT_BATCHES or len(batch[0]) < datamodule.hparams.batch_size:
            break
        batches.append(tuple(tensor.pin_memory() for tensor in batch) if device == "cuda" else batch)
    return batches


def samples_per_unit(datamodule) -> float:
    """Training samples per reported unit: windows per name for the lstm, 1 for images."""
    examples = getattr(datamodule, "train_examples", None)
    if examples is None:
        return 1.0
    training_names = [name for name in datamodule.names if name not in datamodule.held_out_names]
    return len(examples) / len(training_names)


def pin_training_batches(datamodule) -> None:
    """pin_memory on the training DataLoader the datamodule builds (the datamodules have no option for it)."""
    build_loader = datamodule.train_dataloader

    def pinning_loader():
        loader = build_loader()
        loader.pin_memory = True
        return loader

    datamodule.train_dataloader = pinning_loader


def fit_case(case: Case, args, log_dir: str) -> dict:
    """One epoch of `cli.py fit` with the case's settings: warm-up seconds, units per second, batch size."""
    batches = (args.loader_batches if case.workers is not None else args.steps) + args.warmup
    cli = build_cli(case, args, log_dir, batches)
    datamodule = cli.datamodule
    if case.workers is None:
        replay = ReplayedBatches(drawn_batches(datamodule, args.device), batches)
        datamodule.train_dataloader = lambda: replay
    elif case.pin_memory:
        pin_training_batches(datamodule)
    clock = StepClock(args.warmup)
    cli.trainer.callbacks.append(clock)
    if case.compile:
        torch._dynamo.reset()  # graphs are built again; inductor's cache directory keeps what earlier runs compiled
    cli.trainer.fit(cli.model, datamodule)
    release_job_resources()
    batch_size = datamodule.hparams.batch_size
    return {
        "batch_size": batch_size,
        "timed_batches": clock.timed_batches,
        "warmup_s": clock.warm - clock.start,
        "per_s": clock.timed_batches * batch_size / (clock.end - clock.warm) / samples_per_unit(datamodule),
    }


def plain_loop_case(case: Case, args, log_dir: str) -> dict:
    """The example's model, optimizer and replayed batches in a plain training loop, channels_last or not."""
    cli = build_cli(case, args, log_dir, args.steps + args.warmup)
    batches = drawn_batches(cli.datamodule, args.device)
    memory_format = torch.channels_last if case.channels_last else torch.contiguous_format
    model = cli.model.to(args.device, memory_format=memory_format).train()
    optimizer = model.optimizer(model.parameters())
    autocast = torch.autocast(args.device, dtype=torch.bfloat16, enabled=case.precision == BF16)

    def step(images: torch.Tensor, labels: torch.Tensor) -> None:
        images = images.to(args.device, non_blocking=True).contiguous(memory_format=memory_format)
        with autocast:
            loss = F.cross_entropy(model(images), labels.to(args.device, non_blocking=True))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    start = synchronized_now(args.device)
    for index in range(args.warmup):
        step(*batches[index % len(batches)])
    warm = synchronized_now(args.device)
    for index in range(args.steps):
        step(*batches[index % len(batches)])
    end = synchronized_now(args.device)
    batch_size = len(batches[0][0])
    return {
        "batch_size": batch_size,
        "timed_batches": args.steps,
        "warmup_s": warm - start,
        "per_s": args.steps * batch_size / (end - warm),
    }


def synchronized_now(device: str) -> float:
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter()


def measure(case: Case, args, log_dir: str) -> dict:
    if case.channels_last is not None:
        return plain_loop_case(case, args, log_dir)
    return fit_case(case, args, log_dir)


def ratio_summary(values: list[float]) -> dict | None:
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def summarize(runs: list[dict]) -> list[dict]:
    """Per case: median units/s, the per-repeat ratios to its baseline, and for compiled cases the compile seconds."""
    by_key = {}
    for entry in runs:
        by_key.setdefault((entry["example"], entry["comparison"], entry["setting"]), {})[entry["repeat"]] = entry
    rows = []
    for (example, comparison, setting), repeats in by_key.items():
        first = next(iter(repeats.values()))
        baseline = by_key.get((example, comparison, first["baseline"]), {})
        paired = sorted(set(repeats) & set(baseline))
        row = {
            "example": example,
            "comparison": comparison,
            "setting": setting,
            "unit": "images/s" if first["channels_last"] is not None else EXAMPLES[example].unit,
            "batch_size": first["batch_size"],
            "per_s": statistics.median(entry["per_s"] for entry in repeats.values()),
            "repeats": len(repeats),
            "ratio": ratio_summary([repeats[r]["per_s"] / baseline[r]["per_s"] for r in paired]),
        }
        if first["compile"]:
            extra = {r: repeats[r]["warmup_s"] - baseline[r]["warmup_s"] for r in paired}
            row["compile_s_first_run"] = extra.get(0)
            row["compile_s_later_runs"] = ratio_summary([extra[r] for r in paired if r > 0])
        rows.append(row)
    return rows


def ratio_text(ratio: dict | None) -> str:
    if ratio is None:
        return "baseline"
    return f"{ratio['median']:.2f}x ({ratio['min']:.2f}-{ratio['max']:.2f}, n={ratio['n']})"


def compile_text(row: dict) -> str:
    if "compile_s_first_run" not in row:
        return ""
    first, later = row["compile_s_first_run"], row["compile_s_later_runs"]
    parts = [f"{first:.1f} first run" if first is not None else ""]
    if later is not None:
        parts.append(f"{later['median']:.1f} cached")
    return ", ".join(part for part in parts if part)


def print_table(rows: list[dict], header: dict) -> None:
    print(
        f"\n{header['device_name']}, torch {header['torch']}, lightning {header['lightning']}, "
        f"commit {header['commit']}, {header['date']}"
    )
    print("| example | comparison | setting | batch | throughput | vs baseline, median (range, n) | compile s |")
    print("|---|---|---|---:|---:|---:|---:|")
    for row in rows:
        print(
            f"| {row['example']} | {row['comparison']} | {row['setting']} | {row['batch_size']} | "
            f"{row['per_s']:,.0f} {row['unit']} | {ratio_text(row['ratio'])} | {compile_text(row)} |"
        )
    print(
        "\nprecision and compile: Lightning fit on replayed batches; memory format: a plain loop on the same batches "
        "(no template option); loader: the config's own DataLoader and batch"
    )


def run_header(device: str) -> dict:
    return {
        "device": device,
        "device_name": torch.cuda.get_device_name() if device == "cuda" else f"CPU, {os.cpu_count()} cores",
        "torch": torch.__version__,
        "lightning": lightning.__version__,
        "commit": git_commit(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="tiny batches (32x32 images for the cnn), 1 repeat, no compile, no bf16 on a CPU: a rehearsal",
    )
    parser.add_argument("--examples", nargs="+", choices=tuple(EXAMPLES), default=list(EXAMPLES))
    parser.add_argument("--workers", nargs="+", type=int, default=[4], help="num_workers compared with 0")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=80, help="timed batches of the replayed cases")
    parser.add_argument("--loader-batches", type=int, default=28, help="timed batches of the loader cases")
    parser.add_argument(
        "--warmup", type=int, default=8, help="untimed batches first, at least 1 (compilation happens in them)"
    )
    parser.add_argument("--time-limit", type=float, default=100, help="seconds after which no new case starts")
    parser.add_argument("--json", type=Path, help="write every run and the summary here")
    args = parser.parse_args()
    if args.quick:
        args.repeats, args.steps, args.loader_batches, args.warmup = 1, 2, 2, 1
    return args


def main() -> None:
    args = parse_args()
    silence_library_noise()
    for library in ("lightning.pytorch", "lightning.fabric"):  # each run's "Seed set to", "GPU available" lines
        logging.getLogger(library).setLevel(logging.WARNING)
    header = run_header(args.device)
    quick_cpu = args.quick and args.device == "cpu"
    groups = comparisons(args.examples, args.workers, with_compile=not args.quick, with_bf16=not quick_cpu)
    runs, stopped_early, start = [], False, time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(Path(folder) / "inductor")  # empty: the first compile is cold
        for repeat, case in scheduled_cases(groups, args.repeats):
            if time.perf_counter() - start > args.time_limit:
                stopped_early = True
                break
            case_start = time.perf_counter()
            result = measure(case, args, str(Path(folder) / "logs"))
            runs.append({**asdict(case), "repeat": repeat, **result})
            print(
                f"repeat {repeat}: {case.example} {case.setting}: {result['per_s']:,.0f}/s "
                f"({time.perf_counter() - case_start:.1f} s)",
                flush=True,
            )
    rows = summarize(runs)
    print_table(rows, header)
    elapsed = time.perf_counter() - start
    print(f"\n{elapsed:.0f} s" + (f"; stopped starting cases after --time-limit {args.time_limit:g} s" * stopped_early))
    if args.json:
        report = {**header, "args": {**vars(args), "json": str(args.json)}, "elapsed_s": elapsed}
        report.update(stopped_early=stopped_early, summary=rows, runs=runs)
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
