"""Cost of logging images and tables: a CNN training epoch with and without the media callbacks, side by side.

    python benchmarks/media_cost.py [--repeats 5] [--logger csv|wandb|both]

Runs configs/cnn.yaml for one epoch (38 batches) and one validation batch with the default N
(example images every 25 steps, prediction-table rows from every 4th batch), and the same run
with those two callbacks removed; W&B runs offline. Each repeat runs both, alternating which
goes first, so drifting machine speed hits both alike; the overhead is the median of the
per-repeat ratios (target: at most 5%), shown with their range, which is the machine's own
noise. Also reported: the time spent inside the media callbacks during the epoch (a noise-free
lower bound of their cost), and the time the prediction table and its artifact take when
fitting ends, after the last epoch.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.alternation import in_turn  # noqa: E402
from benchmarks.epoch_timer import EpochTimer  # noqa: E402
from callbacks.example_images import ExampleImages  # noqa: E402
from callbacks.prediction_table import PredictionTable  # noqa: E402
from cli import DATA_TO_MODEL_LINKS, TRAINER_DEFAULTS, run  # noqa: E402
from trainrig.cli.template_cli import TemplateCLI  # noqa: E402

MEDIA_CALLBACKS = (ExampleImages, PredictionTable)
EPOCH_HOOKS = ("on_train_epoch_start", "on_train_batch_end", "on_train_epoch_end")


def add_hook_timer(callback, hooks: tuple[str, ...], seconds: list[float]) -> None:
    """Wrap the callback's own hooks so that the time spent in them is added to `seconds[0]`."""
    for hook in hooks:
        method = getattr(callback, hook)

        def timed(*args, _method=method, **kwargs):
            start = time.perf_counter()
            try:
                return _method(*args, **kwargs)
            finally:
                seconds[0] += time.perf_counter() - start

        setattr(callback, hook, timed)


def one_run(logger: str, with_media: bool, log_dir: str) -> dict[str, float]:
    args = ["--config", str(ROOT / "configs" / "cnn.yaml")]
    if logger == "wandb":
        args += ["--config", str(ROOT / "configs" / "logger" / "wandb.yaml")]
    args += [
        "--trainer.max_epochs",
        "1",
        "--trainer.limit_val_batches",
        "1",
        "--trainer.num_sanity_val_steps",
        "0",
        "--trainer.enable_progress_bar",
        "false",
        "--trainer.enable_model_summary",
        "false",
        "--trainer.logger.init_args.save_dir",
        log_dir,
    ]
    cli = TemplateCLI(
        job=run,
        data_to_model_links=DATA_TO_MODEL_LINKS,
        trainer_defaults=TRAINER_DEFAULTS,
        save_config_callback=None,
        args=args,
        run=False,
    )
    trainer = cli.trainer
    if not with_media:
        trainer.callbacks[:] = [callback for callback in trainer.callbacks if not isinstance(callback, MEDIA_CALLBACKS)]
    in_epoch, at_fit_end = [0.0], [0.0]
    for callback in trainer.callbacks:
        if isinstance(callback, MEDIA_CALLBACKS):
            add_hook_timer(callback, EPOCH_HOOKS, in_epoch)
            add_hook_timer(callback, ("on_fit_end",), at_fit_end)
    timer = EpochTimer()
    trainer.callbacks.append(timer)
    trainer.fit(cli.model, cli.datamodule)
    if logger == "wandb":
        import wandb

        wandb.finish()
    return {"epoch": timer.seconds, "in_epoch": in_epoch[0], "at_fit_end": at_fit_end[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--logger", choices=("csv", "wandb", "both"), default="both")
    args = parser.parse_args()
    os.environ.setdefault("WANDB_MODE", "offline")
    os.environ.setdefault("WANDB_SILENT", "true")
    loggers = ("csv", "wandb") if args.logger == "both" else (args.logger,)
    rows = []
    with tempfile.TemporaryDirectory() as log_dir:
        one_run("csv", True, log_dir)  # generates the shapes once and warms up
        for logger in loggers:
            plain, media = [], []
            for repeat in range(args.repeats):
                for with_media in in_turn((False, True), repeat):
                    (media if with_media else plain).append(one_run(logger, with_media, log_dir))
            overheads = [m["epoch"] / p["epoch"] - 1 for p, m in zip(plain, media)]
            in_epoch = statistics.median(m["in_epoch"] / m["epoch"] for m in media)
            rows.append(
                (
                    logger,
                    statistics.median(p["epoch"] for p in plain),
                    statistics.median(m["epoch"] for m in media),
                    overheads,
                    in_epoch,
                    statistics.median(m["at_fit_end"] for m in media),
                )
            )
    print(f"\ntorch {torch.__version__}, {torch.get_num_threads()} threads, medians of {args.repeats} repeats\n")
    print(
        "| logger | epoch without media (s) | epoch with images + table rows (s) | epoch overhead "
        "(per-repeat range) | time in media callbacks during the epoch | table + artifact when fitting ends "
        "(s) |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for logger, plain, media, overheads, in_epoch, at_end in rows:
        spread = f"{100 * min(overheads):+.1f} to {100 * max(overheads):+.1f}%"
        print(
            f"| {logger} | {plain:.2f} | {media:.2f} | {100 * statistics.median(overheads):+.1f}% ({spread}) "
            f"| {100 * in_epoch:.1f}% | {at_end:.2f} |"
        )


if __name__ == "__main__":
    main()
