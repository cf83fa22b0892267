"""The staged MLP streamed from shards (configs/mlp_streaming.yaml over 80 small generated images, 3 or 4 to a
chunk): the shards' writer killed mid-write, refused shards and checkpoints, and runs stopped mid-epoch that resume
exactly, on the same and on another number of processes."""

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.helpers.faults import fault
from tests.helpers.run_dirs import RunDirectory, assert_same_run_directory
from tests.helpers.runs import ROOT
from tests.helpers.strategy_runs import run_processes
from tests.helpers.user_errors import failing_run
from trainrig.data import shards

SHARDS_COMMAND = [sys.executable, "-m", "trainrig.data.shards", "write"]
RECORD = "--trainer.callbacks+=tests.helpers.sample_record.RecordSamples"
DDP = ("--trainer.strategy", "ddp", "--trainer.devices", "2", "--trainer.accelerator", "cpu")
# Reads the trainer's estimated_stepping_batches while the optimizers are configured, before Lightning has read the
# checkpoint: the case where Lightning drops the loader's position (Lightning #20550).
ONE_CYCLE = [
    "--model.init_args.scheduler",
    json.dumps({"class_path": "torch.optim.lr_scheduler.OneCycleLR", "init_args": {"max_lr": 0.01}}),
]


def write_config(path: Path, shards: Path, source_root: Path, images_per_class: int = 16) -> Path:
    """configs/mlp_streaming.yaml with small shards of small images, 2 epochs, no sanity validation."""
    config = yaml.safe_load((ROOT / "configs" / "mlp_streaming.yaml").read_text())
    config["trainer"] |= {"max_epochs": 2, "num_sanity_val_steps": 0, "enable_progress_bar": False}
    config["trainer"] |= {"enable_model_summary": False, "log_every_n_steps": 1, "deterministic": True}
    config["model"]["init_args"] |= {"hidden_sizes": [32]}
    source = {"root": str(source_root), "images_per_class": images_per_class, "canvas_size": 32}
    config["data"]["init_args"] |= {"shards": str(shards), "batch_size": 8, "window_chunks": 2}
    config["data"]["init_args"]["source"]["init_args"] = source
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def write_shards(config: Path) -> tuple[int, str]:
    """`python -m trainrig.data.shards write` in this process: its exit status and what it printed."""
    printed = io.StringIO()
    with contextlib.redirect_stderr(printed):
        try:
            shards.main(["write", "--config", str(config), "--chunk-bytes", "10000"])
        except SystemExit as exit_info:
            return exit_info.code, printed.getvalue()
    return 0, printed.getvalue()


@pytest.fixture(scope="module")
def config(tmp_path_factory, shapes_root) -> Path:
    folder = tmp_path_factory.mktemp("streamed")
    path = write_config(folder / "streamed.yaml", folder / "shards", shapes_root)
    code, printed = write_shards(path)
    assert code == 0, printed[-3000:]
    code, printed = write_shards(path)
    assert code == 0 and "up to date" in printed, printed[-3000:]
    return path


def fit(config: Path, log_dir: Path, *extra: str) -> int:
    args = ["--config", str(config), "--trainer.logger.init_args.save_dir", str(log_dir), *extra]
    code, output = run_processes("fit", args)
    assert code in (0, 143), output[-3000:]
    return code


def test_stopped_mid_epoch_with_one_cycle_resumes_to_the_uninterrupted_run_directory(config, tmp_path):
    """OneCycleLR reads estimated_stepping_batches before the checkpoint's loader position is restored."""
    assert fit(config, tmp_path / "uninterrupted", *ONE_CYCLE) == 0
    stop = fault(12, "SIGTERM", once=tmp_path / "stopped-once")  # the second epoch's fourth step
    assert fit(config, tmp_path / "stopped", *ONE_CYCLE, *stop) == 143
    assert fit(config, tmp_path / "stopped", *ONE_CYCLE, *stop, "--ckpt_path", "last") == 0
    resumed, uninterrupted = (RunDirectory.only_one_under(tmp_path / run) for run in ("stopped", "uninterrupted"))
    assert_same_run_directory(resumed, uninterrupted, "streamed, stopped at step 12")
    (saved,) = (tmp_path / "stopped").rglob("config.yaml")
    assert yaml.safe_load(saved.read_text())["data"]["class_path"].endswith("StreamingImagesDataModule")


@pytest.mark.slow
def test_resumed_on_2_then_1_then_2_processes_each_sample_of_the_epoch_once(config, tmp_path):
    """64 training samples, batches of 8 per process: 4 steps an epoch on 2 processes, 8 on 1."""
    record = [RECORD, f"--trainer.callbacks.init_args.directory={tmp_path / 'samples'}"]
    assert fit(config, tmp_path, *DDP, *record, *fault(5, "SIGTERM", rank=1)) == 143  # 1 step into epoch 2
    assert fit(config, tmp_path, *record, *fault(8, "SIGTERM"), "--ckpt_path", "last") == 143  # 3 more steps
    assert fit(config, tmp_path, *DDP, *record, "--ckpt_path", "last") == 0
    second_epoch = [
        line.split()[1]
        for path in (tmp_path / "samples").glob("rank*.txt")
        for line in path.read_text().splitlines()
        if line.startswith("1 ")
    ]
    assert len(second_epoch) == 64 and len(set(second_epoch)) == 64, "a sample of epoch 2 was skipped or repeated"


def test_a_write_killed_midway_leaves_shards_refused_as_half_written_and_a_rerun_completes(tmp_path, capsys):
    config = write_config(tmp_path / "killed.yaml", tmp_path / "shards", tmp_path / "images", images_per_class=120)
    writer = subprocess.Popen(
        [*SHARDS_COMMAND, "--config", str(config), "--chunk-bytes", "4000"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 240
    while not (tmp_path / "shards" / "train").is_dir() and writer.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait()
    assert not (tmp_path / "shards" / "shards.json").exists(), "the write ended before the kill: retry the test"
    error = failing_run(capsys, "fit", ["--config", str(config), "--trainer.logger.init_args.save_dir", str(tmp_path)])
    assert "half-written" in error and error.count("\n") == 1, error
    assert not (tmp_path / "mlp_streaming").exists(), "a refused run wrote its folder"
    code, printed = write_shards(config)
    assert code == 0 and (tmp_path / "shards" / "shards.json").is_file(), printed[-3000:]


def test_shards_missing_or_from_another_data_set_are_refused_in_one_line(config, tmp_path, capsys):
    missing = write_config(tmp_path / "missing.yaml", tmp_path / "nowhere", tmp_path / "images")
    other = yaml.safe_load(config.read_text())
    other["data"]["init_args"]["source"]["init_args"]["images_per_class"] = 17
    (tmp_path / "other.yaml").write_text(yaml.safe_dump(other))
    for path, problem in ((missing, "are missing"), (tmp_path / "other.yaml", "written from another data set")):
        log_dir = tmp_path / path.stem
        error = failing_run(capsys, "fit", ["--config", str(path), "--trainer.logger.init_args.save_dir", str(log_dir)])
        assert problem in error and error.count("\n") == 1, error
        assert not log_dir.exists()
    code, printed = write_shards(tmp_path / "other.yaml")
    assert code == 2 and "holds shards of another data set" in printed and printed.count("\n") == 1, printed


def test_a_checkpoint_counting_in_other_shards_is_refused_in_one_line(tmp_path, capsys):
    """The same source config, its data changed after the checkpoint's shards were written."""
    images = tmp_path / "images"
    changed = write_config(tmp_path / "changed.yaml", tmp_path / "shards", images)
    assert write_shards(changed)[0] == 0
    assert fit(changed, tmp_path, "--trainer.max_epochs", "1", "--trainer.limit_train_batches", "2") == 0
    (checkpoint,) = tmp_path.rglob("last.ckpt")
    (image, *_) = sorted(images.rglob("*.png"))
    image.write_bytes(next(path for path in sorted(images.rglob("*.png")) if path != image).read_bytes())
    rewritten = write_config(tmp_path / "rewritten.yaml", tmp_path / "rewritten", images)
    assert write_shards(rewritten)[0] == 0
    before = sorted(path for path in tmp_path.rglob("*") if "rewritten" not in str(path))
    args = [
        "--config",
        str(rewritten),
        "--trainer.logger.init_args.save_dir",
        str(tmp_path),
        "--ckpt_path",
        str(checkpoint),
    ]
    error = failing_run(capsys, "fit", args)
    assert "counts its data position in other shards" in error and error.count("\n") == 1, error
    assert sorted(path for path in tmp_path.rglob("*") if "rewritten" not in str(path)) == before
