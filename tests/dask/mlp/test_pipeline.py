"""The MLP's pipeline under the Dask launcher, one stage per worker; a model-parallel strategy it cannot run is
refused."""

import re
from pathlib import Path

import pytest

from tests.dask.runs import losses, report_of_a_stalled_run, start_lightning_launched, wait_for_success
from tests.helpers.runs import run_cli, small_run_args


def pipeline_args(log_dir: Path, shapes_root: Path, *extra: str) -> list[str]:
    return small_run_args("mlp.yaml", log_dir, shapes_root, "--trainer.strategy", "pipeline", *extra)


def test_pipeline_through_dask_matches_the_pipeline_lightning_launches(tmp_path, shapes_root):
    baseline = start_lightning_launched(pipeline_args(tmp_path / "lightning", shapes_root, "--trainer.devices", "2"))
    run_cli("fit", pipeline_args(tmp_path / "dask", shapes_root, "--dask.n_workers", "2"))
    wait_for_success(baseline)
    assert len(losses(tmp_path / "dask")) == 3
    assert losses(tmp_path / "dask") == pytest.approx(losses(tmp_path / "lightning"), rel=1e-5)


@pytest.mark.timeout(240)
@pytest.mark.slow  # CI budget: 32 s; a stalled DDP rank stays
def test_a_stalled_pipeline_stage_fails_the_run_after_the_dask_timeout(tmp_path, shapes_root):
    report = report_of_a_stalled_run(
        pipeline_args(tmp_path, shapes_root, "--dask.n_workers", "2", "--trainer.strategy.init_args.timeout", "0:00:15")
    )
    assert re.search(r"rank 0 \(Dask worker \S+, pid \d+\) failed: .*Timed out waiting 15000ms", report), report


def test_layer_split_is_refused_before_any_cluster_starts(tmp_path, shapes_root, capsys):
    args = small_run_args(
        "mlp.yaml", tmp_path, shapes_root, "--dask.n_workers", "2", "--trainer.strategy", "layer_split"
    )
    with pytest.raises(SystemExit) as exit_info:
        run_cli("fit", args)
    assert exit_info.value.code == 2
    assert "not DDP-based" in capsys.readouterr().err
