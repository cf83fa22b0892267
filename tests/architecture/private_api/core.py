"""What the CLI, the callbacks and resume/ touch."""

import argparse
import importlib

from lightning.pytorch import Trainer
from lightning.pytorch.callbacks import ModelCheckpoint, ModelSummary
from lightning.pytorch.loggers import CSVLogger
from torchmetrics import MeanMetric

MODULE_NAMES = {
    (
        "lightning.pytorch.utilities.model_summary.model_summary",
        "_format_summary_table",
    ): "trainrig/loggers/model_summary.py",
    ("lightning.pytorch.utilities", "_pytree"): "trainrig/cli/entry.py (a warning filter names the module)",
    (
        "torch.distributed.rendezvous",
        "_rendezvous_handlers",
    ): "trainrig/resume/torchrun_restarts.py, trainrig/network.py",
    # Not imported: its `if callable(fn)` skips a hook set to None, what the template's idle-hook skip relies on.
    (
        "lightning.pytorch.trainer.call",
        "_call_callback_hooks",
    ): "trainrig/monitoring/idle_hooks.py (relies on its `if callable(fn)`: tests/monitoring/test_idle_hooks.py)",
    # Rebuilding a user's training DataLoader with a resumable sampler, as Lightning's `_update_dataloader` does.
    (
        "lightning.pytorch.utilities.data",
        "_get_dataloader_init_args_and_kwargs",
    ): "trainrig/resume/data_order.py (ResumableTrainingLoader)",
    (
        "lightning.fabric.utilities.data",
        "_reinstantiate_wrapped_cls",
    ): "trainrig/resume/data_order.py (ResumableTrainingLoader)",
}


def _csv_experiment_writer():
    return importlib.import_module("lightning.pytorch.loggers.csv_logs").ExperimentWriter


ATTRIBUTES = [
    ("epoch loop", lambda: Trainer(logger=False).fit_loop.epoch_loop, "_results", "trainrig/resume/epoch_metrics.py"),
    ("torchmetrics Metric", MeanMetric, "_update_count", "trainrig/resume/epoch_metrics.py"),
    ("torchmetrics Metric", MeanMetric, "_computed", "trainrig/resume/epoch_metrics.py"),
    ("ModelCheckpoint", ModelCheckpoint, "_save_checkpoint", "trainrig/resume/checkpoint.py (overridden)"),
    ("ModelCheckpoint", ModelCheckpoint, "_last_global_step_saved", "trainrig/resume/checkpoint.py"),
    ("ModelCheckpoint", ModelCheckpoint, "_monitor_candidates", "trainrig/resume/checkpoint.py"),
    ("ModelCheckpoint", ModelCheckpoint, "_save_last_checkpoint", "trainrig/resume/checkpoint.py"),
    ("CSVLogger", lambda: CSVLogger("logs"), "_fs", "trainrig/resume/csv_logger.py"),
    ("CSVLogger", lambda: CSVLogger("logs"), "_flush_logs_every_n_steps", "trainrig/resume/csv_logger.py"),
    ("CSVLogger", lambda: CSVLogger("logs"), "_experiment", "trainrig/resume/csv_logger.py (assigned)"),
    ("ExperimentWriter", _csv_experiment_writer, "_check_log_dir_exists", "trainrig/resume/csv_logger.py (overridden)"),
    ("ModelSummary", ModelSummary, "_max_depth", "trainrig/loggers/model_summary.py"),
    (
        "fit loop",
        lambda: Trainer(logger=False).fit_loop,
        "_combined_loader_states_to_load",
        "trainrig/resume/data_order.py (LoaderPositionRestore)",
    ),
    (
        "fit loop",
        lambda: Trainer(logger=False).fit_loop,
        "_load_combined_loader_states",
        "trainrig/resume/data_order.py (LoaderPositionRestore)",
    ),
    (
        "fit loop",
        lambda: Trainer(logger=False).fit_loop,
        "_data_fetcher",
        "trainrig/resume/data_order.py (LoaderPositionRestore)",
    ),
    (
        "Trainer",
        lambda: Trainer(logger=False),
        "_logger_connector",
        "trainrig/monitoring/log_steps.py (should_update_logs, as LearningRateMonitor reads it)",
    ),
    (
        "epoch loop",
        lambda: Trainer(logger=False).fit_loop.epoch_loop,
        "_batches_that_stepped",
        "trainrig/monitoring/throughput.py (the step of Lightning's log row, as LearningRateMonitor reads it)",
    ),
    (
        "epoch loop",
        lambda: Trainer(logger=False).fit_loop.epoch_loop,
        "_broadcast_sigterm_tensor",
        "trainrig/resume/preemption.py (replaced: skipped while the template handles SIGTERM)",
    ),
    (
        "Trainer",
        lambda: Trainer(logger=False),
        "_signal_connector",
        "trainrig/resume/preemption.py (a SIGTERM Lightning's handler took before the template's went in)",
    ),
    (
        "ArgumentParser",
        lambda: argparse.ArgumentParser(),
        "_actions",
        "trainrig/errors/options.py (a cluster tool's options, --help included, and its subcommands); "
        "tests/cli/test_bad_input_options.py (a tool's options)",
    ),
]
