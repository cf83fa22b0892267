"""What each example logs, with the default CSV logger: files in the log directory."""
# cookiecutter: only with wandb
# And with W&B offline, read back from the run directory W&B writes.
# cookiecutter: end

import csv
import os  # cookiecutter: only with wandb
import re  # cookiecutter: only with wandb
import subprocess  # cookiecutter: only with wandb
import sys  # cookiecutter: only with wandb
from pathlib import Path

import pytest

from conftest import EXAMPLE_CONFIGS, ROOT, last_value, read_metrics, run_cli, small_run_args

WANDB_CONFIG = str(ROOT / "configs" / "logger" / "wandb.yaml")  # cookiecutter: only with wandb


def media_tables(log_dir: Path, key: str) -> list[list[list[str]]]:
    return [list(csv.reader(path.open())) for path in sorted(log_dir.rglob(f"media/{key}/*.csv"))]


# cookiecutter: only with cnn
def test_cnn_writes_example_images_and_a_final_epoch_prediction_table(tmp_path, shapes_root):
    # max_steps ends fitting early in the second of three epochs: that epoch is the final one.
    run_cli(
        "fit",
        small_run_args("cnn.yaml", tmp_path, shapes_root, "--trainer.max_epochs", "3", "--trainer.max_steps", "4"),
    )
    assert list(tmp_path.rglob("media/examples_example_images/step*.png"))
    (table,) = media_tables(tmp_path, "train_predictions")
    assert [path.name for path in tmp_path.rglob("media/train_predictions/*.csv")] == ["step000004.csv"], (
        "written once, when fitting ends"
    )
    assert table[0] == ["image", "label", "prediction", "confidence"]
    assert len(table) > 1
    table_dir = next(tmp_path.rglob("media/train_predictions"))
    for image_file, label, prediction, confidence in table[1:]:
        assert (table_dir / image_file).is_file()
        assert label in {"circle", "cross", "ring", "square", "triangle"} and prediction in {
            "circle",
            "cross",
            "ring",
            "square",
            "triangle",
        }
        assert 0.2 <= float(confidence) <= 1.0
    rows = read_metrics(tmp_path)
    epochs = [float(row["train/epoch"]) for row in rows if row.get("train/epoch")]
    assert epochs == sorted(epochs) and epochs[0] == 0 and 1 <= epochs[-1] < 2
    assert last_value(rows, "lr-Adam") == pytest.approx(0.001)


# cookiecutter: end


# cookiecutter: only with lstm
def test_lstm_writes_generated_names_marked_against_training_data(tmp_path):
    run_cli("fit", small_run_args("lstm.yaml", tmp_path))
    (table,) = media_tables(tmp_path, "generated_names")
    assert table[0] == ["name", "in_training_data"] and len(table) == 21
    assert {row[1] for row in table[1:]} <= {"True", "False"}
    assert all(row[0] == row[0].title() for row in table[1:])


# cookiecutter: end


# cookiecutter: only with mlp
def test_mlp_writes_epoch_loss_and_a_confusion_matrix_over_the_validation_set(tmp_path, shapes_root):
    run_cli("fit", small_run_args("mlp.yaml", tmp_path, shapes_root, "--trainer.limit_val_batches", "1.0"))
    (table,) = media_tables(tmp_path, "val_confusion_matrix")
    assert table[0][1:] == ["circle", "cross", "ring", "square", "triangle"]
    counts = [[int(value) for value in row[1:]] for row in table[1:]]
    assert sum(map(sum, counts)) == 12  # 5 shapes x 12 images, 20% held out
    assert last_value(read_metrics(tmp_path), "train/epoch_loss") > 0


# cookiecutter: end


# cookiecutter: only with wandb
def wandb_run_args(config: str, log_dir: Path, shapes_root: Path, *extra: str) -> list[str]:
    args = small_run_args(config, log_dir, shapes_root, *extra)
    return (
        args[:2]
        + ["--config", WANDB_CONFIG]
        + args[2:]
        + ["--trainer.logger.init_args.group", "tests", "--trainer.logger.init_args.tags", "[offline, ci]"]
    )


def offline_runs(log_dir: Path):
    from wandb_records import read_offline_run

    return [read_offline_run(run_dir) for run_dir in sorted(log_dir.rglob("offline-run-*")) if run_dir.is_dir()]


@pytest.fixture
def wandb_offline(monkeypatch):
    """Offline W&B; the run is finished after each test, as a CLI process finishes it at exit."""
    wandb = pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    yield wandb
    wandb.finish()


EXPECTED_WANDB_KEYS = {
    # cookiecutter: only with cnn
    "cnn.yaml": [
        "train/loss",
        "lr-Adam",
        "train/epoch",
        "val/acc",
        "examples/example_images/_type",
        "train_predictions/_type",
    ],
    # cookiecutter: end
    # cookiecutter: only with lstm
    "lstm.yaml": [
        "train/loss",
        "lr-Adam",
        "train/epoch",
        "val/perplexity",
        "generated_names/_type",
    ],
    # cookiecutter: end
    # cookiecutter: only with mlp
    "mlp.yaml": [
        "train/loss",
        "lr-Adam",
        "train/epoch",
        "train/epoch_loss",
        "val/acc",
        "val/confusion_matrix/_type",
    ],
    # cookiecutter: end
}


@pytest.mark.parametrize("config", sorted(EXPECTED_WANDB_KEYS))
def test_wandb_offline_run_holds_the_reference_keys_and_the_resolved_config(
    config, tmp_path, shapes_root, wandb_offline
):
    run_cli("fit", wandb_run_args(config, tmp_path, shapes_root))
    wandb_offline.finish()
    (run,) = offline_runs(tmp_path)
    assert (run.project, run.group, run.tags) == ("lightning-distributed-template", "tests", ["offline", "ci"])
    assert {"model", "data", "trainer"} <= set(run.config)
    assert run.config["trainer"]["max_epochs"] == 1
    for key in EXPECTED_WANDB_KEYS[config]:
        assert run.values(key), f"{key} missing from the W&B run"
    losses = run.values("train/loss")
    assert len(losses) == 3 and all(0 < loss < 10 for loss in losses)
    # cookiecutter: only with cnn
    if config == "cnn.yaml":
        assert any(kind == "train_predictions" for _, kind in run.artifacts), run.artifacts
    # cookiecutter: end


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


# cookiecutter: only with dask


def test_dask_run_makes_exactly_one_wandb_run(tmp_path, shapes_root):
    pytest.importorskip("wandb")
    pytest.importorskip("distributed")
    run_offline(wandb_run_args(EXAMPLE_CONFIGS[-1], tmp_path, shapes_root, "--dask.n_workers", "2"))
    (run,) = offline_runs(tmp_path)
    assert len(run.values("train/loss")) == 3, "rank 0 logs every step once"


def test_dask_restart_continues_the_jobs_wandb_run(tmp_path, shapes_root):
    """Rank 1 is killed after step 2; the restarted ranks log into the W&B run the job pinned before its first try."""
    pytest.importorskip("wandb")
    pytest.importorskip("distributed")
    kill = [
        "--trainer.callbacks+=tests.helpers.faults.SignalAtStep",
        "--trainer.callbacks.init_args.step=2",
        "--trainer.callbacks.init_args.signal_name=SIGKILL",
        "--trainer.callbacks.init_args.rank=1",
        f"--trainer.callbacks.init_args.once_marker={tmp_path / 'killed'}",
    ]
    output = run_offline(
        wandb_run_args(EXAMPLE_CONFIGS[-1], tmp_path, shapes_root, "--dask.n_workers", "2", "--dask.max_restarts", "1")
        + kill
    )
    assert "restart 1 of 1" in output, output[-3000:]
    (pinned,) = re.findall(r"dask: W&B run id (\w+):", output)
    (run_dir,) = [path for path in tmp_path.rglob("offline-run-*") if path.is_dir()]
    assert run_dir.name.endswith(f"-{pinned}"), f"{run_dir.name} is not the job's run {pinned}"


# cookiecutter: end
# cookiecutter: end
