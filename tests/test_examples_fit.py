"""Every example config trains for a few batches on CPU and leaves checkpoints and metrics behind."""

import math

import pytest

from conftest import EXAMPLE_CONFIGS, last_value, read_metrics, run_cli, small_run_args

EXPECTED_METRICS = {
    # cookiecutter: only with cnn
    "cnn.yaml": [
        "train/loss",
        "train/acc",
        "val/loss",
        "val/acc",
        "val/acc_top5",
        "val/confidence",
        "lr-Adam",
    ],
    # cookiecutter: end
    "mlp.yaml": ["train/loss", "train/acc", "val/loss", "val/acc", "val/confidence"],  # cookiecutter: only with mlp
    "lstm.yaml": ["train/loss", "train/perplexity", "val/loss", "val/perplexity"],  # cookiecutter: only with lstm
}


@pytest.mark.smoke
@pytest.mark.parametrize("config", EXAMPLE_CONFIGS)
def test_fit_writes_checkpoints_and_namespaced_metrics(config, tmp_path, shapes_root):
    run_cli("fit", small_run_args(config, tmp_path, shapes_root))
    (run_dir,) = [path.parent for path in tmp_path.rglob("config.yaml")]
    checkpoints = sorted(path.name for path in (run_dir / "checkpoints").iterdir())
    assert "last.ckpt" in checkpoints and any(name.startswith("best-") for name in checkpoints)
    rows = read_metrics(tmp_path)
    for key in EXPECTED_METRICS[config]:
        assert math.isfinite(last_value(rows, key)), f"{key} is not finite"
    assert last_value(rows, "val/loss") > 0


# cookiecutter: only with lstm
def test_perplexity_is_the_exponential_of_the_per_character_loss(tmp_path):
    run_cli("fit", small_run_args("lstm.yaml", tmp_path))
    rows = read_metrics(tmp_path)
    assert last_value(rows, "val/perplexity") == pytest.approx(math.exp(last_value(rows, "val/loss")), rel=0.02)
    assert last_value(rows, "val/perplexity") < 31, (
        "an LSTM that has seen data beats uniform guessing over 31 characters"
    )


@pytest.mark.parametrize("precision", ["32-true", "bf16-true"])
def test_lstm_predict_writes_generated_names(tmp_path, precision):
    run_cli("fit", small_run_args("lstm.yaml", tmp_path / "fit"))
    (checkpoint,) = (tmp_path / "fit").rglob("last.ckpt")
    run_cli(
        "predict",
        small_run_args(
            "lstm.yaml",
            tmp_path / "predict",
            None,
            "--ckpt_path",
            str(checkpoint),
            "--data.init_args.num_names_to_generate",
            "40",
            "--trainer.precision",
            precision,
        ),
    )
    (names_file,) = (tmp_path / "predict").rglob("generated_names.txt")
    names = names_file.read_text().splitlines()
    assert 0 < len(names) <= 40
    assert all(name and set(name.lower()) <= set("abcdefghijklmnopqrstuvwxyz-. ") for name in names)
    assert all(name == name.title() for name in names), "printed title-cased, as the reference prints them"


# cookiecutter: end


def test_print_config_reproduces_the_run(tmp_path, shapes_root, capsys):
    args = small_run_args(EXAMPLE_CONFIGS[-1], tmp_path, shapes_root)
    with pytest.raises(SystemExit) as exit_info:
        run_cli("fit", [*args, "--print_config"])
    assert exit_info.value.code == 0
    printed = tmp_path / "printed.yaml"
    printed.write_text(capsys.readouterr().out)
    run_cli("fit", ["--config", str(printed)])
    assert "last.ckpt" in {path.name for path in tmp_path.rglob("*.ckpt")}


# cookiecutter: only with mlp
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


# cookiecutter: end
