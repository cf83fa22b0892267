"""A run killed after its best checkpoint was saved and before `last.ckpt` was resumes to the uninterrupted run's run
directory: the best file that the stopped run's abandoned future left is removed, not versioned as `-v1`, and so is
a partial file of an interrupted write (trainrig/resume/abandoned_future.py); on one process, and under fsdp2 on two,
whose checkpoints are directories of shards written into a hidden staging directory."""

import os
import signal
from pathlib import Path

import pytest
from typing_extensions import override

from tests.helpers.mlp.resume_runs import (
    UninterruptedRuns,
    assert_same_run,
    mlp_args,
    run,
    run_ok,
    write_settings,
)
from trainrig.resume.atomic_io import AtomicCheckpointIO
from trainrig.strategies.fsdp2 import FSDP2Strategy

FSDP2 = ("--trainer.strategy", "fsdp2", "--trainer.devices", "2", "--trainer.accelerator", "cpu")


class KilledAfterBestSave(AtomicCheckpointIO):
    """The template's checkpoint writer, SIGKILLed right after it wrote the first best checkpoint, once."""

    def __init__(self, once_marker: str):
        super().__init__()
        self.once_marker = Path(once_marker)

    @override
    def save_checkpoint(self, checkpoint, path, storage_options=None) -> None:
        super().save_checkpoint(checkpoint, path, storage_options)
        if Path(path).name.startswith("best") and not self.once_marker.exists():
            self.once_marker.touch()
            os.kill(os.getpid(), signal.SIGKILL)


class KilledAfterBestSaveFSDP2(FSDP2Strategy):
    """The fsdp2 strategy, its process group (both ranks) SIGKILLed once the first best checkpoint directory is
    complete: saved through the strategy, not a CheckpointIO plugin, and complete once every rank is past the save's
    last barrier."""

    def __init__(self, once_marker: str):
        super().__init__()
        self.once_marker = Path(once_marker)

    @override
    def save_checkpoint(self, checkpoint, filepath, storage_options=None) -> None:
        super().save_checkpoint(checkpoint, filepath, storage_options)
        if self.is_global_zero and Path(filepath).name.startswith("best") and not self.once_marker.exists():
            self.once_marker.touch()
            os.killpg(os.getpgrp(), signal.SIGKILL)


@pytest.fixture(scope="module")
def settings(tmp_path_factory, shapes_root) -> Path:
    return write_settings(tmp_path_factory.mktemp("settings"), shapes_root)


def test_kill_between_the_best_save_and_last_ckpt_resumes_without_a_versioned_best_file(
    tmp_path_factory, settings, tmp_path
):
    uninterrupted = UninterruptedRuns(tmp_path_factory, settings)["single"]
    plugin = {"class_path": f"{__name__}.KilledAfterBestSave", "init_args": {"once_marker": str(tmp_path / "killed")}}
    command = mlp_args(settings, tmp_path, "single", "--trainer.plugins", str(plugin).replace("'", '"'))
    code, output = run(command)
    assert code == -9, output[-3000:]
    checkpoints = tmp_path / "mlp" / "version_0" / "checkpoints"
    assert sorted(path.name for path in checkpoints.glob("best*")), "the kill came after a best checkpoint was saved"

    partial = checkpoints / ".last.ckpt.12345.partial"  # as a kill in the middle of a write leaves it
    partial.write_bytes(b"half a checkpoint")

    output = run_ok([*command, "--ckpt_path", "last"])
    assert "saved after the checkpoint this run continues from" in output, output[-3000:]
    assert not partial.exists(), "the partial file of an interrupted write is removed"
    assert not list(checkpoints.glob("*-v1*")), sorted(path.name for path in checkpoints.iterdir())
    assert_same_run(tmp_path, uninterrupted, "killed after the best save")


@pytest.mark.slow  # CI budget: 90 s
def test_fsdp2_killed_between_the_best_save_and_last_ckpt_resumes_without_a_versioned_best_directory(
    tmp_path_factory, settings, tmp_path
):
    uninterrupted = tmp_path_factory.mktemp("uninterrupted-fsdp2")
    run_ok(mlp_args(settings, uninterrupted, "single", *FSDP2))
    killed = [
        *("--trainer.strategy", f"{__name__}.KilledAfterBestSaveFSDP2"),
        f"--trainer.strategy.init_args.once_marker={tmp_path / 'killed'}",
    ]
    command = mlp_args(settings, tmp_path, "single", *FSDP2[2:], *killed)  # FSDP2's devices and accelerator
    code, output = run(command)
    assert code == -9, output[-3000:]
    checkpoints = tmp_path / "mlp" / "version_0" / "checkpoints"
    assert [path for path in checkpoints.glob("best*") if path.is_dir()], "the kill came after a best directory"

    # What kills in the middle of sharded writes leave (trainrig/strategies/fsdp2.py, trainrig/resume/sharded.py):
    # the hidden staging directory of a save, some ranks' shards and no index, here of a best checkpoint the resumed
    # run never saves (the uninterrupted run keeps epoch 0's best), so that the strategy's next save of that name
    # does not clear it either; and a checkpoint directory moved aside to be replaced, half deleted.
    leftovers = [
        checkpoints / ".best-epochepoch=01-stepstep=8.ckpt.12345.partial",
        checkpoints / ".previous.ckpt.12345.old",
    ]
    for leftover in leftovers:
        leftover.mkdir()
        (leftover / "__0_0.distcp").write_bytes(b"half a shard")

    output = run_ok([*command, "--ckpt_path", "last"])  # the same command: its config is the killed run's
    assert "saved after the checkpoint this run continues from" in output, output[-3000:]
    assert not [path.name for path in leftovers if path.exists()], "what interrupted sharded writes left is removed"
    assert not list(checkpoints.glob("*-v1*")), sorted(path.name for path in checkpoints.iterdir())
    assert_same_run(tmp_path, uninterrupted, "fsdp2 killed after the best save")
