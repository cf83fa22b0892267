"""The CNN example's own fit and predict behaviour: `cli.py predict` classifies its held-out images."""

from tests.helpers.predicted_classes import held_out_files, read_predictions
from tests.helpers.runs import run_cli, small_run_args


def test_cnn_predict_writes_a_class_for_every_held_out_image(tmp_path, shapes_root):
    run_cli("fit", small_run_args("cnn.yaml", tmp_path / "fit", shapes_root))
    (checkpoint,) = (tmp_path / "fit").rglob("last.ckpt")
    run_cli("predict", small_run_args("cnn.yaml", tmp_path / "predict", shapes_root, "--ckpt_path", str(checkpoint)))
    rows, datamodule = read_predictions(tmp_path / "predict")
    assert sorted(row["image"] for row in rows) == sorted(held_out_files(datamodule))
    names = datamodule.class_names
    assert all(row["class_name"] == names[int(row["class_id"])] for row in rows)
    assert all(1 / len(names) <= float(row["probability"]) <= 1 for row in rows), "the most probable class's"
