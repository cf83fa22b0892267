"""A hostile checkpoint that the Dask launcher would resume from, in a run folder or in `--dask.checkpoint_dir`, is
refused by the client before any cluster starts: one line, exit 2, the payload never ran, nothing written (a worker
would leave its scratch folder in the temporary directory the test watches)."""

import shutil
from pathlib import Path

import pytest

from tests.helpers.hostile import assert_refused, hostile_checkpoint
from tests.helpers.runs import EXAMPLE_CONFIGS, ROOT, run_cli, small_run_args

CONFIG = EXAMPLE_CONFIGS[0]


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory, shapes_root) -> Path:
    """One short run's folder (`<experiment>/version_0`, with `checkpoints/last.ckpt`)."""
    logs = tmp_path_factory.mktemp("trained")
    run_cli("fit", small_run_args(CONFIG, logs, shapes_root))
    return next(logs.rglob("last.ckpt")).parent.parent


@pytest.mark.parametrize("where", ["a run folder", "--dask.checkpoint_dir"])
def test_a_hostile_checkpoint_to_resume_is_refused_before_the_cluster_starts(where, trained_run, tmp_path, shapes_root):
    marker, logs, shared = tmp_path / "marker", tmp_path / "logs", tmp_path / "shared"
    planted = (shared if where == "--dask.checkpoint_dir" else logs) / trained_run.parent.name / trained_run.name
    shutil.copytree(trained_run, planted)
    evil = hostile_checkpoint(planted / "checkpoints" / "last.ckpt", marker)
    dask = [
        "--dask.n_workers",
        "2",
        *(["--dask.checkpoint_dir", str(shared)] if where == "--dask.checkpoint_dir" else []),
    ]
    command = [str(ROOT / "cli.py"), "fit", *small_run_args(CONFIG, logs, shapes_root), *dask, "--ckpt_path", "last"]
    scratch = {"DASK_TEMPORARY_DIRECTORY": str(tmp_path / "scratch")}
    line = assert_refused(command, marker, [tmp_path], mentions="--weights_only false", environment=scratch)
    assert str(evil) in line
