"""What each example logs with W&B offline, read back from the run directory W&B writes."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.examples import artifacts, logged, media
from tests.helpers.runs import EXAMPLE_CONFIGS, ROOT, run_cli, small_run_args

WANDB_CONFIG = str(ROOT / "configs" / "logger" / "wandb.yaml")


def wandb_run_args(config: str, log_dir: Path, shapes_root: Path, *extra: str) -> list[str]:
    args = small_run_args(config, log_dir, shapes_root, *extra)
    return (
        args[:2]
        + ["--config", WANDB_CONFIG]
        + args[2:]
        + ["--trainer.logger.init_args.group", "tests", "--trainer.logger.init_args.tags", "[offline, ci]"]
    )


def offline_runs(log_dir: Path):
    from tests.helpers.wandb_records import read_offline_run

    return [read_offline_run(run_dir) for run_dir in sorted(log_dir.rglob("offline-run-*")) if run_dir.is_dir()]


@pytest.fixture
def wandb_offline(monkeypatch):
    """Offline W&B; the run is finished after each test, as a CLI process finishes it at exit."""
    wandb = pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    yield wandb
    wandb.finish()


@pytest.mark.parametrize("config", EXAMPLE_CONFIGS)
def test_wandb_offline_run_holds_the_reference_keys_and_the_resolved_config(
    config, tmp_path, shapes_root, wandb_offline
):
    run_cli("fit", wandb_run_args(config, tmp_path, shapes_root))
    wandb_offline.finish()
    (run,) = offline_runs(tmp_path)
    assert (run.project, run.group, run.tags) == ("lightning-distributed-template", "tests", ["offline", "ci"])
    assert {"model", "data", "trainer"} <= set(run.config)
    assert run.config["trainer"]["max_epochs"] == 1
    for key in ["train/epoch", *logged(config), *(f"{name}/_type" for name in media(config))]:
        assert run.values(key), f"{key} missing from the W&B run"
    losses = run.values("train/loss")
    assert len(losses) == 3 and all(0 < loss < 10 for loss in losses)
    assert set(artifacts(config)) <= {kind for _, kind in run.artifacts}, run.artifacts


def test_each_wandb_run_keeps_its_config_in_its_own_folder(tmp_path, shapes_root, wandb_offline):
    """Two fresh runs: each config.yaml beside that run's checkpoints, none loose in save_dir, none named a resume."""
    for _ in range(2):
        run_cli("fit", wandb_run_args(EXAMPLE_CONFIGS[-1], tmp_path, shapes_root))
        wandb_offline.finish()
    configs = sorted(path.relative_to(tmp_path).parts for path in tmp_path.rglob("config*.yaml"))
    assert len(configs) == 2 and {parts[-1] for parts in configs} == {"config.yaml"}, configs
    for parts in configs:
        assert parts[0] == "lightning-distributed-template", parts
        assert (tmp_path.joinpath(*parts).parent / "checkpoints" / "last.ckpt").is_file(), parts


def run_offline(args: list[str]) -> str:
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, "cli.py", "fit", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout + result.stderr


def test_ddp_run_makes_exactly_one_wandb_run(tmp_path, shapes_root):
    pytest.importorskip("wandb")
    run_offline(
        wandb_run_args(
            EXAMPLE_CONFIGS[-1],
            tmp_path,
            shapes_root,
            "--trainer.strategy",
            "ddp",
            "--trainer.devices",
            "2",
            "--trainer.accelerator",
            "cpu",
        )
    )
    (run,) = offline_runs(tmp_path)
    assert len(run.values("train/loss")) == 3, "rank 0 logs every step once"
