"""What the MLP example logs with the default CSV logger: files in the log directory."""

from tests.helpers.media import media_tables
from tests.helpers.runs import last_value, read_metrics, run_cli, small_run_args


def test_mlp_writes_epoch_loss_and_a_confusion_matrix_over_the_validation_set(tmp_path, shapes_root):
    run_cli("fit", small_run_args("mlp.yaml", tmp_path, shapes_root, "--trainer.limit_val_batches", "1.0"))
    (table,) = media_tables(tmp_path, "val_confusion_matrix")
    assert table[0][1:] == ["circle", "cross", "ring", "square", "triangle"]
    counts = [[int(value) for value in row[1:]] for row in table[1:]]
    assert sum(map(sum, counts)) == 12  # 5 shapes x 12 images, 20% held out
    assert last_value(read_metrics(tmp_path), "train/epoch_loss") > 0
