"""Time to quality: how long each example's config takes to reach its target, and where it ends, over seeds.

    python benchmarks/time_to_quality.py [--examples cnn mlp lstm] [--seeds 42 1 7 2 3] [--device cpu|cuda]

Each run is `python cli.py fit --config configs/<example>.yaml --seed_everything SEED` in a process of its own (the
config as a user runs it, on `--device`), with QualityClock added to its callbacks: at every validation end it
records the seconds since the benchmark started the process (start-up, data preparation and validation included)
and the example's quality measure. The measure and its target are the config's `# target: MEASURE >= VALUE` line:

val/acc          the classifiers' validation accuracy, as logged.
real_name_share  the pet-name generator's share of real pet names (names in the data) among 2,000 names generated
                 at temperature 1 with nothing excluded, from a fixed generator (benchmarks/pet_name_samples.py's
                 measure); generating them is left out of the clock.

Seconds to target: the first validation end at which the measure reaches the target (none when it never does);
final: the measure at the last one. Medians and ranges over the seeds in a first table, each seed's in a second. The
seeds run one after another: on a shared machine the seconds move with the load, the values do not.
"""

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from lightning.pytorch import Callback
from typing_extensions import override

ROOT = Path(__file__).resolve().parent.parent
TARGET_LINE = re.compile(r"^# target: (?P<measure>[\w/]+) >= (?P<value>[0-9.]+)", re.MULTILINE)
GENERATED_NAMES = 2000


def target(example: str) -> tuple[str, float]:
    """The `# target: MEASURE >= VALUE` line of configs/<example>.yaml."""
    found = TARGET_LINE.search((ROOT / "configs" / f"{example}.yaml").read_text())
    if found is None:
        raise ValueError(f"configs/{example}.yaml has no '# target: MEASURE >= VALUE' line")
    return found["measure"], float(found["value"])


def pet_names(datamodule) -> set[str]:
    """The pet names in the data: the names file's datamodule reads them; the streaming one's shards hold examples,
    so its names are those of the file its `source` datamodule names."""
    if hasattr(datamodule, "names"):
        return set(datamodule.names)
    from datamodules.pet_names import usable_names  # the user's wing, only when the LSTM is measured

    names, _ = usable_names(Path(datamodule.hparams.source["init_args"]["names_path"]))
    return set(names)


@torch.no_grad()
def real_name_share(module, datamodule) -> float:
    """The share of `GENERATED_NAMES` names, drawn from a fixed generator, that are pet names in the data."""
    known = pet_names(datamodule)
    names = module.generate(GENERATED_NAMES, generator=torch.Generator().manual_seed(0))
    return sum(name in known for name in names) / len(names)


class QualityClock(Callback):
    """Appends `{"seconds": ..., "value": ...}` to `path` at every validation end (not the sanity check): seconds since
    `started_at` (a unix time), less the time this callback spent measuring."""

    def __init__(self, path: str, measure: str, started_at: float):
        self.path, self.measure, self.started_at = path, measure, started_at
        self.measuring_s = 0.0

    @override
    def on_validation_end(self, trainer, pl_module) -> None:
        if trainer.sanity_checking or trainer.global_rank != 0:
            return
        reached_at = time.time()
        if self.measure == "real_name_share":
            training = pl_module.training
            pl_module.eval()
            value = real_name_share(pl_module, trainer.datamodule)
            pl_module.train(training)
        else:
            value = float(trainer.callback_metrics[self.measure])
        seconds = reached_at - self.started_at - self.measuring_s
        self.measuring_s += time.time() - reached_at
        with open(self.path, "a") as handle:
            handle.write(json.dumps({"seconds": seconds, "value": value}) + "\n")


def one_run(example: str, seed: int, device: str, folder: Path) -> list[dict[str, float]]:
    measure, _ = target(example)
    record = folder / f"{example}-seed{seed}.jsonl"
    started_at = time.time()
    command = [
        sys.executable, str(ROOT / "cli.py"), "fit", "--config", str(ROOT / "configs" / f"{example}.yaml"),
        "--seed_everything", str(seed), "--trainer.accelerator", device, "--trainer.devices", "1",
        "--trainer.enable_progress_bar", "false", "--trainer.logger.init_args.save_dir", str(folder / "logs"),
        "--trainer.callbacks+=benchmarks.time_to_quality.QualityClock", "--trainer.callbacks.path", str(record),
        "--trainer.callbacks.measure", measure, "--trainer.callbacks.started_at", str(started_at),
    ]  # fmt: skip
    finished = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if finished.returncode != 0:
        raise RuntimeError(f"{example} seed {seed} failed:\n{finished.stderr[-3000:]}")
    return [json.loads(line) for line in record.read_text().splitlines()]


def spread(values: list[float], digits: int) -> str:
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f} to {max(values):.{digits}f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", nargs="+", default=["cnn", "mlp", "lstm"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[42, 1, 7, 2, 3])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    args = parser.parse_args()
    per_seed = [
        "| example | seed | value at each validation end | last | seconds to target |",
        "|---|---:|---|---:|---:|",
    ]
    print("| example | target | seeds reaching it | seconds to target | final value | values by epoch, per seed |")
    print("|---|---|---:|---:|---:|---|")
    for example in args.examples:
        measure, value = target(example)
        with tempfile.TemporaryDirectory() as folder:
            runs = {seed: one_run(example, seed, args.device, Path(folder)) for seed in args.seeds}
        to_target = [next((r["seconds"] for r in run if r["value"] >= value), None) for run in runs.values()]
        reached = [seconds for seconds in to_target if seconds is not None]
        finals = [run[-1]["value"] for run in runs.values()]
        curves = "; ".join(f"{seed}: " + " ".join(f"{r['value']:.3f}" for r in run) for seed, run in runs.items())
        print(
            f"| {example} | {measure} >= {value} | {len(reached)}/{len(runs)} | "
            f"{spread(reached, 0) if reached else 'never'} | {spread(finals, 3)} | {curves} |"
        )
        for (seed, run), seconds in zip(runs.items(), to_target):
            values = " ".join(f"{record['value']:.3f}" for record in run)
            reached_at = "never" if seconds is None else f"{seconds:.0f}"
            per_seed.append(f"| {example} | {seed} | {values} | {run[-1]['value']:.3f} | {reached_at} |")
    print()
    print("\n".join(per_seed))


if __name__ == "__main__":
    main()
