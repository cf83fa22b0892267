"""A run started before the machinery moved into trainrig/ continues with today's code (issue 26): its checkpoint
names no module of the project (Lightning's state, tensors, and callback state keyed by class name), so moving the
modules leaves every checkpoint loadable.

The old run is the template at the commit before the move, unpacked from the repository's history.
"""

import io
import os
import subprocess
import sys
import tarfile

import pytest
import torch
import yaml

from tests.helpers import ROOT
from tests.helpers.runs import EXAMPLE_CONFIGS, read_metrics, small_run_args
from tests.template.history import BEFORE_THE_MOVE, skip_without

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def unpack(commit: str, destination) -> None:
    archive = subprocess.run(["git", "archive", commit], cwd=ROOT, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(destination, filter="data")


def fit(cwd, args: list[str]) -> None:
    result = subprocess.run(
        [sys.executable, "cli.py", "fit", *args], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=240
    )
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("config", EXAMPLE_CONFIGS)
def test_a_checkpoint_written_before_the_move_continues_the_run(config, tmp_path, shapes_root):
    skip_without(BEFORE_THE_MOVE)
    old_tree = tmp_path / "before_the_move"
    unpack(BEFORE_THE_MOVE, old_tree)
    old_args = small_run_args(config, tmp_path / "old_logs", shapes_root)
    old_args[old_args.index("--config") + 1] = str(old_tree / "configs" / config)
    fit(old_tree, old_args)
    (old_checkpoint,) = (tmp_path / "old_logs").rglob("last.ckpt")
    saved_step = torch.load(old_checkpoint, map_location="cpu", weights_only=True)["global_step"]

    new_args = small_run_args(config, tmp_path / "new_logs", shapes_root, "--ckpt_path", str(old_checkpoint))
    new_args[new_args.index("--trainer.max_epochs") + 1] = "2"
    # The run continues with the model and optimizer settings it was started with, as its user would continue it;
    # a config's recipe may have changed since (the CNN's schedule did), which is not what the move is about.
    continued_config = yaml.safe_load((ROOT / "configs" / config).read_text())
    continued_config["model"] = yaml.safe_load((old_tree / "configs" / config).read_text())["model"]
    (tmp_path / config).write_text(yaml.safe_dump(continued_config))
    new_args[new_args.index("--config") + 1] = str(tmp_path / config)
    fit(ROOT, new_args)
    (new_checkpoint,) = (tmp_path / "new_logs").rglob("last.ckpt")
    continued = torch.load(new_checkpoint, map_location="cpu", weights_only=True)
    assert continued["epoch"] == 1 and continued["global_step"] == 2 * saved_step > 0
    # It continued rather than started over (which would end at the same step): nothing of the first epoch trained
    # again.
    rows = read_metrics(tmp_path / "new_logs")
    assert {row["epoch"] for row in rows if row["epoch"]} == {"1"}
    assert min(int(row["step"]) for row in rows) >= saved_step
