"""Every private Lightning, torch and torchmetrics name the project touches, in one list that an upgrade checks.

A private name can change or vanish in any release without a deprecation. Each entry says where the project uses
it; the test fails naming the entry that no longer resolves, so an upgrade shows each touch point at once. A
second test keeps the list whole: a private name imported from those libraries anywhere in the project must be in
it.
"""

import importlib
import re
from pathlib import Path

import pytest
import torch
from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.callbacks import ModelCheckpoint, ModelSummary
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.strategies import DDPStrategy, SingleDeviceStrategy
from torchmetrics import MeanMetric

ROOT = Path(__file__).resolve().parent.parent
LIBRARIES = ("lightning", "torch", "torchmetrics")

# (module, name): imported or read from the module itself.
MODULE_NAMES = {
    ("lightning.pytorch.utilities.model_summary.model_summary", "_format_summary_table"): "callbacks/model_summary.py",
    ("lightning.pytorch.utilities", "_pytree"): "cli.py (a warning filter names the module)",
    ("torch.distributed.rendezvous", "_rendezvous_handlers"): "resume/torchrun_restarts.py",
    # cookiecutter: only with mlp
    ("lightning.pytorch.strategies.launchers", "_SubprocessScriptLauncher"): "strategies/pipeline.py (subclassed)",
    ("lightning.fabric.utilities.optimizer", "_optimizers_to_device"): "strategies/pipeline.py",
    # cookiecutter: end
    # cookiecutter: only with cnn and mlp
    ("torch.distributed.pipelining.stage", "_PipelineStageBase"): "benchmarks/strategies.py (compute actions timed)",
    # cookiecutter: end
}


def _csv_experiment_writer():
    return importlib.import_module("lightning.pytorch.loggers.csv_logs").ExperimentWriter


# Attributes of objects, read, assigned or overridden: (what has it, how to build one, attribute name, used by).
ATTRIBUTES = [
    ("epoch loop", lambda: Trainer(logger=False).fit_loop.epoch_loop, "_results", "resume/epoch_metrics.py"),
    ("torchmetrics Metric", MeanMetric, "_update_count", "resume/epoch_metrics.py"),
    ("torchmetrics Metric", MeanMetric, "_computed", "resume/epoch_metrics.py"),
    ("ModelCheckpoint", ModelCheckpoint, "_save_checkpoint", "resume/checkpoint.py (overridden)"),
    ("ModelCheckpoint", ModelCheckpoint, "_last_global_step_saved", "resume/checkpoint.py"),
    ("ModelCheckpoint", ModelCheckpoint, "_monitor_candidates", "resume/checkpoint.py"),
    ("ModelCheckpoint", ModelCheckpoint, "_save_last_checkpoint", "resume/checkpoint.py"),
    ("CSVLogger", lambda: CSVLogger("logs"), "_fs", "resume/csv_logger.py"),
    ("ExperimentWriter", _csv_experiment_writer, "_check_log_dir_exists", "resume/csv_logger.py (overridden)"),
    ("ModelSummary", ModelSummary, "_max_depth", "callbacks/model_summary.py"),
    # cookiecutter: only with lstm
    ("LightningModule", LightningModule, "_trainer", "lightning_modules/name_generator.py"),
    # cookiecutter: end
    # cookiecutter: only with mlp
    ("SingleDeviceStrategy", lambda: SingleDeviceStrategy("cpu"), "_root_device", "strategies/layer_split.py"),
    ("DDPStrategy", DDPStrategy, "_configure_launcher", "strategies/pipeline.py (overridden)"),
    ("DDPStrategy", DDPStrategy, "_launcher", "strategies/pipeline.py (assigned)"),
    ("torch.nn.Module", torch.nn.Module, "_modules", "strategies/stages.py"),
    # cookiecutter: end
]


@pytest.mark.parametrize(("module", "name"), list(MODULE_NAMES), ids=[name for _, name in MODULE_NAMES])
def test_private_module_name_still_exists(module, name):
    assert hasattr(importlib.import_module(module), name), f"{module}.{name}, used by {MODULE_NAMES[module, name]}"


@pytest.mark.parametrize(("owner", "build", "name", "used_by"), ATTRIBUTES, ids=[entry[2] for entry in ATTRIBUTES])
def test_private_attribute_still_exists(owner, build, name, used_by):
    assert hasattr(build(), name), f"{owner}.{name}, used by {used_by}"


PRIVATE_IMPORT = re.compile(r"^from ((?:" + "|".join(LIBRARIES) + r")\S*) import (\([^)]*\)|[^\n]+)", re.M)


def test_every_private_import_is_listed():
    listed = set(MODULE_NAMES)
    unlisted = []
    for path in ROOT.rglob("*.py"):
        if ".venv" in path.parts or path.name == Path(__file__).name:
            continue
        for module, names in PRIVATE_IMPORT.findall(path.read_text()):
            for name in re.findall(r"\b(_[A-Za-z]\w*)", names):
                if (module, name) not in listed:
                    unlisted.append(f"{path.relative_to(ROOT)}: {module}.{name}")
    assert not unlisted, f"private names missing from this file's lists: {unlisted}"
