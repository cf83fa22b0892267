"""Cost of logging images and tables: a CNN training epoch with and without the media callbacks, side by side.

    python benchmarks/monitoring.py [--repeats 3] [--logger csv|wandb|both]

Runs configs/cnn.yaml for one epoch and one validation batch (the epoch is also the final one, so the predictions table is
built) with the default N (example images every 25 steps, table rows from every 4th batch),
and the same run with those callbacks removed. W&B runs offline. Reports median epoch times
and the overhead; the target is at most 5%.
"""

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.epoch_timer import EpochTimer  # noqa: E402
from callbacks.example_images import ExampleImages  # noqa: E402
from callbacks.prediction_table import PredictionTable  # noqa: E402
from cli import CLI_SETTINGS, TemplateCLI  # noqa: E402

MEDIA_CALLBACKS = (ExampleImages, PredictionTable)


def epoch_seconds(logger: str, with_media: bool, log_dir: str) -> float:
    args = ["--config", str(ROOT / "configs" / "cnn.yaml")]
    if logger == "wandb":
        args += ["--config", str(ROOT / "configs" / "logger" / "wandb.yaml")]
    args += [
        "--trainer.max_epochs", "1", "--trainer.limit_val_batches", "1", "--trainer.num_sanity_val_steps", "0", "--trainer.enable_progress_bar", "false",
        "--trainer.enable_model_summary", "false", "--trainer.logger.init_args.save_dir", log_dir,
    ]
    cli = TemplateCLI(**{**CLI_SETTINGS, "save_config_callback": None}, args=args, run=False)
    trainer = cli.trainer
    if not with_media:
        trainer.callbacks[:] = [callback for callback in trainer.callbacks if not isinstance(callback, MEDIA_CALLBACKS)]
    timer = EpochTimer()
    trainer.callbacks.append(timer)
    trainer.fit(cli.model, cli.datamodule)
    if logger == "wandb":
        import wandb

        wandb.finish()
    return timer.seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--logger", choices=("csv", "wandb", "both"), default="both")
    args = parser.parse_args()
    os.environ.setdefault("WANDB_MODE", "offline")
    os.environ.setdefault("WANDB_SILENT", "true")
    loggers = ("csv", "wandb") if args.logger == "both" else (args.logger,)
    rows = []
    with tempfile.TemporaryDirectory() as log_dir:
        epoch_seconds("csv", True, log_dir)  # generates the shapes once and warms up
        for logger in loggers:
            plain, media = [], []
            for _ in range(args.repeats):
                plain.append(epoch_seconds(logger, False, log_dir))
                media.append(epoch_seconds(logger, True, log_dir))
            rows.append((logger, statistics.median(plain), statistics.median(media)))
    print(f"\ntorch {torch.__version__}, {torch.get_num_threads()} threads, medians of {args.repeats} epochs\n")
    print("| logger | epoch without media (s) | epoch with images + table (s) | overhead |")
    print("|---|---:|---:|---:|")
    for logger, plain, media in rows:
        print(f"| {logger} | {plain:.2f} | {media:.2f} | {100 * (media / plain - 1):+.1f}% |")


if __name__ == "__main__":
    main()
