"""The MLP example learns its generated stand-in data, and `cli.py predict` classifies its held-out images."""

from pathlib import Path

import pytest
import torch

from lightning_modules.mlp_classifier import MLPClassifier
from tests.helpers.predicted_classes import held_out_files, read_predictions
from tests.helpers.runs import last_value, read_metrics, run_cli, small_run_args
from tests.helpers.strategy_runs import run_ok


def test_mlp_learns_the_generated_shapes(tmp_path, shapes_root):
    """The stand-in data set is learnable: well above the 20% chance level after a short run."""
    args = small_run_args(
        "mlp.yaml",
        tmp_path,
        shapes_root,
        "--trainer.max_epochs",
        "8",
        "--trainer.limit_train_batches",
        "1.0",
        "--trainer.limit_val_batches",
        "1.0",
    )
    args += ["--data.init_args.images_per_class", "150", "--data.init_args.batch_size", "32"]
    run_cli("fit", args)
    assert last_value(read_metrics(tmp_path), "val/acc") > 0.4


@pytest.fixture(scope="module")
def mlp_checkpoint(tmp_path_factory, shapes_root) -> Path:
    """One short fit, whose last.ckpt the predict tests share."""
    log_dir = tmp_path_factory.mktemp("mlp_fit")
    run_cli("fit", small_run_args("mlp.yaml", log_dir, shapes_root))
    (checkpoint,) = log_dir.rglob("last.ckpt")
    return checkpoint


def predict_args(log_dir: Path, shapes_root: Path, checkpoint: Path, *extra: str) -> list[str]:
    return small_run_args("mlp.yaml", log_dir, shapes_root, "--ckpt_path", str(checkpoint), *extra)


def test_mlp_predict_writes_the_models_class_for_every_held_out_image(tmp_path, shapes_root, mlp_checkpoint):
    run_cli("predict", predict_args(tmp_path, shapes_root, mlp_checkpoint))
    rows, datamodule = read_predictions(tmp_path)
    assert {row["image"] for row in rows} == held_out_files(datamodule) and len(rows) == len(datamodule.held_out_set)
    names = datamodule.class_names
    assert all(row["class_name"] == names[int(row["class_id"])] for row in rows)
    assert all(row["label"] == row["image"].split("/")[0] for row in rows), "the class folder is the true label"

    model = MLPClassifier.load_from_checkpoint(mlp_checkpoint, map_location="cpu").eval()
    some = range(0, len(rows), 3)
    images = torch.stack([datamodule.held_out_set[index][0] for index in some])
    with torch.no_grad():
        probabilities = model(images).softmax(dim=-1)
    assert [int(rows[index]["class_id"]) for index in some] == probabilities.argmax(dim=-1).tolist()
    written = torch.tensor([float(rows[index]["probability"]) for index in some])
    assert torch.allclose(written, probabilities.amax(dim=-1), atol=1e-5)


def test_mlp_predictions_are_the_same_on_two_processes(tmp_path, shapes_root, mlp_checkpoint):
    """Each rank classifies half of the images; rank 0 writes them all, in the order one process does."""
    run_cli("predict", predict_args(tmp_path / "one", shapes_root, mlp_checkpoint))
    ddp = ("--trainer.strategy", "ddp", "--trainer.devices", "2", "--trainer.accelerator", "cpu")
    output = run_ok("predict", predict_args(tmp_path / "two", shapes_root, mlp_checkpoint, *ddp))
    (one, _), (two, _) = read_predictions(tmp_path / "one"), read_predictions(tmp_path / "two")
    assert output.count(f"wrote {len(one)} predictions") == 1, "rank 0 alone writes, every rank's rows"
    assert len(one) > 2 and [row["image"] for row in two] == [row["image"] for row in one]
    for row_one, row_two in zip(one, two):
        assert {**row_two, "probability": None} == {**row_one, "probability": None}
        assert float(row_two["probability"]) == pytest.approx(float(row_one["probability"]), abs=1e-5)
