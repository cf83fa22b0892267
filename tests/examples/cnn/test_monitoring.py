"""What the CNN example logs with the default CSV logger: files in the log directory."""

from tests.helpers.media import media_tables
from tests.helpers.runs import last_value, read_metrics, run_cli, small_run_args


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
    assert 0 < last_value(rows, "lr-AdamW") <= 0.003, "the one cycle's rate, at most the config's max_lr"
