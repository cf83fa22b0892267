"""What each example logs with W&B offline, read back from the run directory W&B writes."""

import pytest

from tests.helpers.examples import artifacts, logged, media
from tests.helpers.run_if import run_if
from tests.helpers.runs import EXAMPLE_CONFIGS, run_cli
from tests.wandb.records import offline_runs, run_offline, wandb_run_args

pytestmark = run_if(packages=("wandb",))


@pytest.fixture
def wandb_offline(monkeypatch):
    """Offline W&B; the run is finished after each test, as a CLI process finishes it at exit."""
    import wandb

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


def test_ddp_run_makes_exactly_one_wandb_run(tmp_path, shapes_root):
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
