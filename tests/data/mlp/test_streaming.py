"""The staged MLP streamed from shards (tests/helpers/mlp/streamed_runs.py): the shards' writer killed mid-write,
refused shards and checkpoints, and runs stopped (SIGTERM) or killed (-9) mid-epoch that resume exactly, on the same
and on another number of processes or strategy."""

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
from tests.helpers.mlp.streamed_runs import assert_each_sample_once, assert_streamed, write_config, write_shards
from tests.helpers.run_dirs import RunDirectory, assert_same_run_directory
from tests.helpers.runs import ROOT
from tests.helpers.strategy_runs import run_processes
from tests.helpers.user_errors import failing_run

SHARDS_COMMAND = [sys.executable, "-m", "trainrig.data.shards", "write"]
RECORD = "--trainer.callbacks+=tests.helpers.sample_record.RecordSamples"
DDP = ("--trainer.strategy", "ddp", "--trainer.devices", "2", "--trainer.accelerator", "cpu")
FSDP2 = ("--trainer.strategy", "fsdp2", "--trainer.devices", "2", "--trainer.accelerator", "cpu")
ONE_PROCESS = ()
# Reads the trainer's estimated_stepping_batches while the optimizers are configured, before Lightning has read the
# checkpoint: the case where Lightning drops the loader's position (Lightning #20550).
ONE_CYCLE = [
    "--model.init_args.scheduler",
    json.dumps({"class_path": "torch.optim.lr_scheduler.OneCycleLR", "init_args": {"max_lr": 0.01}}),
]
CHECKPOINT_EVERY = 3  # last.ckpt every 3 steps, so that a kill -9 mid-epoch has one to resume from
EXIT_STATUS = {"SIGTERM": 143, "SIGKILL": -signal.SIGKILL}


@pytest.fixture(scope="module")
def config(tmp_path_factory, shapes_root) -> Path:
    folder = tmp_path_factory.mktemp("streamed")
    path = write_config(folder / "streamed.yaml", folder / "shards", shapes_root, checkpoint_every=CHECKPOINT_EVERY)
    code, printed = write_shards(path)
    assert code == 0, printed[-3000:]
    code, printed = write_shards(path)
    assert code == 0 and "up to date" in printed, printed[-3000:]
    return path


def fit(config: Path, log_dir: Path, *extra: str) -> int:
    args = ["--config", str(config), "--trainer.logger.init_args.save_dir", str(log_dir), *extra]
    code, output = run_processes("fit", args)
    assert code in (0, *EXIT_STATUS.values()), output[-3000:]
    return code


@pytest.fixture(scope="module")
def uninterrupted_one_cycle(config, tmp_path_factory) -> RunDirectory:
    log_dir = tmp_path_factory.mktemp("uninterrupted")
    assert fit(config, log_dir, *ONE_CYCLE) == 0
    return RunDirectory.only_one_under(log_dir)


@pytest.mark.parametrize(
    ("stop", "step"),
    # SIGKILL: after step 13, which resumes from step 12's periodic checkpoint. SIGTERM with -m slow (CI budget): the
    # kill is the harder case of the same loader position.
    [pytest.param("SIGTERM", 12, marks=pytest.mark.slow), ("SIGKILL", 13)],
)
def test_stopped_mid_epoch_with_one_cycle_resumes_to_the_uninterrupted_run_directory(
    config, uninterrupted_one_cycle, tmp_path, stop, step
):
    """Stopped in the second epoch (8 steps an epoch) by SIGTERM, or killed (-9) without a checkpoint of its own;
    OneCycleLR reads estimated_stepping_batches before the checkpoint's loader position is restored."""
    fault_args = fault(step, stop, once=tmp_path / "stopped-once")
    assert fit(config, tmp_path, *ONE_CYCLE, *fault_args) == EXIT_STATUS[stop]
    assert fit(config, tmp_path, *ONE_CYCLE, *fault_args, "--ckpt_path", "last") == 0
    context = f"streamed, {stop} after step {step}"
    assert_same_run_directory(RunDirectory.only_one_under(tmp_path), uninterrupted_one_cycle, context)
    assert_streamed(tmp_path, config.parent / "shards")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("runs", "epochs"),
    [
        pytest.param([(DDP, 5), (ONE_PROCESS, 8), (DDP, None)], 2, id="2-1-2-processes"),
        pytest.param([(DDP, 5), (FSDP2, None)], 2, id="ddp-fsdp2"),
        pytest.param([(FSDP2, 5), (DDP, None)], 2, id="fsdp2-ddp"),
    ],
)
def test_resumed_on_other_processes_or_strategies_each_sample_of_the_epoch_once(config, tmp_path, runs, epochs):
    """Each run but the last stopped by SIGTERM after the step given (4 steps an epoch on 2 processes, 8 on 1); the
    next continues with `--ckpt_path last` on the processes and strategy given. The second epoch is interrupted."""
    record = [RECORD, f"--trainer.callbacks.init_args.directory={tmp_path / 'samples'}"]
    for number, (processes, stop_after) in enumerate(runs):
        resume = ["--ckpt_path", "last"] if number else []
        stop = fault(stop_after, "SIGTERM", rank=1 if processes else 0) if stop_after else []
        code = fit(config, tmp_path, *processes, *record, "--trainer.max_epochs", str(epochs), *stop, *resume)
        assert code == (143 if stop_after else 0)
    assert_each_sample_once(tmp_path / "samples", epoch=1)
    assert_streamed(tmp_path, config.parent / "shards")


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
