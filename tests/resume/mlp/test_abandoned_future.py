"""A run killed after its best checkpoint was saved and before `last.ckpt` was resumes to the uninterrupted run's run
directory: the best file that the stopped run's abandoned future left is removed, not versioned as `-v1`, and so is
a partial file of an interrupted write (trainrig/resume/abandoned_future.py)."""

import os
import signal
from pathlib import Path

import pytest

from tests.helpers.mlp.resume_runs import (
    UninterruptedRuns,
    assert_same_run,
    mlp_args,
    run,
    run_ok,
    write_settings,
)
from trainrig.resume.atomic_io import AtomicCheckpointIO


class KilledAfterBestSave(AtomicCheckpointIO):
    """The template's checkpoint writer, SIGKILLed right after it wrote the first best checkpoint, once."""

    def __init__(self, once_marker: str):
        super().__init__()
        self.once_marker = Path(once_marker)

    def save_checkpoint(self, checkpoint, path, storage_options=None) -> None:
        super().save_checkpoint(checkpoint, path, storage_options)
        if Path(path).name.startswith("best") and not self.once_marker.exists():
            self.once_marker.touch()
            os.kill(os.getpid(), signal.SIGKILL)


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
