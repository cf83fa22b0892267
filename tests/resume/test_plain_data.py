"""A datamodule written the plain way (tests/helpers/plain_data.py: `DataLoader(..., shuffle=True)`, no template
helper) resumes bit for bit: the template rebuilds its training loader to keep the data position
(trainrig/resume/data_order.py, `ResumableTrainingLoader`). Stopped by a real SIGTERM in the middle of the second
epoch and resumed with `--ckpt_path last`, the run directory is the uninterrupted run's. A loader whose position
cannot be kept says so in one line at the start of the run."""

from pathlib import Path

import pytest
import yaml

from tests.helpers.faults import fault
from tests.helpers.mlp.resume_runs import assert_same_run
from tests.helpers.runs import run_cli
from tests.helpers.sample_record import samples_by_rank
from tests.helpers.strategy_runs import run_processes

PREEMPTED = 143
# 32 samples in batches of 8: 4 steps an epoch, 2 epochs; the stop comes after step 6, mid-epoch.
STOP_STEP = 6


def settings(directory: Path, log_dir: Path, **data) -> Path:
    config = {
        "seed_everything": 42,
        "trainer": {
            "max_epochs": 2,
            "deterministic": True,
            "log_every_n_steps": 1,
            "num_sanity_val_steps": 0,
            "enable_progress_bar": False,
            "enable_model_summary": False,
            "logger": {
                "class_path": "trainrig.resume.csv_logger.ContinuingCSVLogger",
                "init_args": {"save_dir": str(log_dir), "name": "plain"},
            },
            "callbacks": [
                {
                    "class_path": "trainrig.resume.checkpoint.ResumableCheckpoint",
                    "init_args": {"every_n_train_steps": 2, "train_time_interval": None},
                }
            ],
        },
        "model": {
            "class_path": "lightning_modules.mlp_classifier.MLPClassifier",
            "init_args": {"hidden_sizes": [16], "num_stages": 1},
        },
        "data": {"class_path": "tests.helpers.plain_data.PlainDataModule", "init_args": {"samples": 32, **data}},
    }
    path = directory / "plain.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def run(config: Path, *extra: str) -> tuple[int, str]:
    return run_processes("fit", ["--config", str(config), *extra])


# Workers in the default run (the harder case: each sample seeded, whichever worker loads it); none with -m slow.
@pytest.mark.parametrize("num_workers", [pytest.param(0, marks=pytest.mark.slow), 2])
def test_plain_dataloader_stopped_mid_epoch_resumes_to_the_uninterrupted_run_directory(tmp_path, num_workers):
    uninterrupted, stopped = tmp_path / "uninterrupted", tmp_path / "stopped"
    code, output = run(settings(uninterrupted.parent, uninterrupted, num_workers=num_workers))
    assert code == 0, output[-3000:]

    (tmp_path / "stopped-settings").mkdir()
    config = settings(tmp_path / "stopped-settings", stopped, num_workers=num_workers)
    stop = fault(STOP_STEP, "SIGTERM", once=tmp_path / "stopped-once")
    code, output = run(config, *stop)
    assert code == PREEMPTED, output[-3000:]
    code, output = run(config, *stop, "--ckpt_path", "last")
    assert code == 0, output[-3000:]
    assert f"(step {STOP_STEP})" in output, output[-3000:]
    assert "resume: the training" not in output, "a plain map-style loader is made resumable without a word"
    assert_same_run(stopped, uninterrupted, f"plain DataLoader, {num_workers} workers")


# Slow (CI budget): the default run checks the same sampler across process counts with the template's own data
# (tests/resume/mlp/test_faults.py); this adds the rebuilt loader's share of it under DDP.
@pytest.mark.slow
def test_plain_dataloader_resumed_with_another_number_of_processes_skips_and_repeats_no_sample(tmp_path):
    """Stopped under 2-process DDP (64 samples: 4 steps an epoch) after step 6, in the second epoch, resumed in one
    process: every sample once in that epoch."""
    record = tmp_path / "samples"
    recorder = [
        "--trainer.callbacks+=tests.helpers.sample_record.RecordSamples",
        f"--trainer.callbacks.init_args.directory={record}",
    ]
    config = settings(tmp_path, tmp_path / "logs", samples=64)
    ddp = ["--trainer.strategy", "ddp", "--trainer.devices", "2"]
    code, output = run(config, *ddp, *fault(5, "SIGTERM", rank=1), *recorder)
    assert code == PREEMPTED, output[-3000:]
    assert "preempted at step 6 " in output, output[-3000:]  # several processes learn of a stop a step later
    code, output = run(config, "--ckpt_path", "last", *recorder)
    assert code == 0, output[-3000:]

    second_epoch = [line for lines in samples_by_rank(record).values() for line in lines if line.startswith("1 ")]
    assert len(second_epoch) == 64, "2 steps x 2 ranks x 8 samples before the stop, 4 steps x 8 after it"
    assert len(set(second_epoch)) == 64, "a sample was seen twice in the interrupted epoch"


def test_iterable_dataset_says_in_one_line_that_it_cannot_resume_mid_epoch(tmp_path, capsys):
    config = settings(tmp_path, tmp_path / "logs", iterable=True)
    run_cli("fit", ["--config", str(config), "--trainer.max_steps", "1"])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("resume: the training")]
    assert lines == [
        "resume: the training dataset Streamed is an IterableDataset, which keeps no position: a run resumed in the "
        "middle of an epoch starts that epoch's data again; give the loader a state_dict and load_state_dict, or "
        "build it with trainrig.resume.data_order.resumable_loader (docs/resume.md)"
    ]
