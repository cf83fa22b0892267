"""A Dask job with W&B: one W&B run, continued by the job's restarts."""

import re

import pytest

from tests.helpers.faults import fault
from tests.helpers.run_if import run_if
from tests.helpers.runs import EXAMPLE_CONFIGS
from tests.wandb.records import offline_runs, run_offline, wandb_run_args


@run_if(packages=("wandb", "distributed"))
def test_dask_run_makes_exactly_one_wandb_run(tmp_path, shapes_root):
    run_offline(wandb_run_args(EXAMPLE_CONFIGS[-1], tmp_path, shapes_root, "--dask.n_workers", "2"))
    (run,) = offline_runs(tmp_path)
    assert len(run.values("train/loss")) == 3, "rank 0 logs every step once"


@pytest.mark.slow  # CI budget: 67 s
@run_if(packages=("wandb", "distributed"))
def test_dask_restart_continues_the_jobs_wandb_run(tmp_path, shapes_root):
    """Rank 1 is killed after step 2; the restarted ranks log into the W&B run the job pinned before its first try."""
    kill = fault(2, "SIGKILL", rank=1, once=tmp_path / "killed")
    output = run_offline(
        wandb_run_args(EXAMPLE_CONFIGS[-1], tmp_path, shapes_root, "--dask.n_workers", "2", "--dask.max_restarts", "1")
        + kill
    )
    assert "restart 1 of 1" in output, output[-3000:]
    (pinned,) = re.findall(r"dask: W&B run id (\w+):", output)
    (run_dir,) = [path for path in tmp_path.rglob("offline-run-*") if path.is_dir()]
    assert run_dir.name.endswith(f"-{pinned}"), f"{run_dir.name} is not the job's run {pinned}"
