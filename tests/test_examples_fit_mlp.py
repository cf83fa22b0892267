"""The MLP example learns its generated stand-in data."""

from tests.helpers.runs import last_value, read_metrics, run_cli, small_run_args


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
