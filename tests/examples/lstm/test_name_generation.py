"""`cli.py predict` on the pet-name example: options given to it take effect although the checkpoint was trained with
other values, and a checkpoint of either formulation samples from the conditional it learned. How the generator
samples is in tests/examples/lstm/unit/test_name_sampling.py."""

from pathlib import Path

import pytest

from datamodules.pet_names import clean_names, read_names
from lightning_modules.name_generator import NameGenerator
from tests.helpers.runs import ROOT, last_value, read_metrics, run_cli, small_run_args


# Options given to `cli.py predict` take effect although the checkpoint was trained with other values.
@pytest.fixture(scope="module")
def trained_checkpoint(tmp_path_factory) -> Path:
    log_dir = tmp_path_factory.mktemp("fit")
    run_cli("fit", small_run_args("lstm.yaml", log_dir))
    (checkpoint,) = log_dir.rglob("last.ckpt")
    return checkpoint


def predicted_names(checkpoint: Path, log_dir: Path, *options: str) -> list[str]:
    args = small_run_args("lstm.yaml", log_dir, None, "--ckpt_path", str(checkpoint), *options)
    run_cli("predict", [*args, "--data.init_args.num_names_to_generate", "300"])
    (names_file,) = log_dir.rglob("generated_names.txt")
    return [name.lower() for name in names_file.read_text().splitlines()]


def test_predict_honours_temperature(trained_checkpoint, tmp_path):
    keep_all = ("--model.init_args.exclude_training_names", "false")
    cold = predicted_names(trained_checkpoint, tmp_path / "cold", "--model.init_args.temperature", "1e-4", *keep_all)
    warm = predicted_names(trained_checkpoint, tmp_path / "warm", *keep_all)
    assert len(set(cold)) <= 3 < len(set(warm)), "a cold sampler repeats the likeliest name (3 steps: flat logits)"


def test_predict_honours_max_name_length(trained_checkpoint, tmp_path):
    names = predicted_names(trained_checkpoint, tmp_path, "--model.init_args.max_name_length", "3")
    assert (
        names
        and max(map(len, names)) <= 3
        and max(map(len, predicted_names(trained_checkpoint, tmp_path / "default"))) > 3
    )


def test_predict_honours_exclude_training_names(trained_checkpoint, tmp_path):
    known = set(clean_names(read_names(ROOT / "data" / "pet_names.txt"))[0])
    short = ("--model.init_args.max_name_length", "2")
    kept = predicted_names(
        trained_checkpoint, tmp_path / "kept", "--model.init_args.exclude_training_names", "false", *short
    )
    excluded = predicted_names(trained_checkpoint, tmp_path / "excluded", *short)
    assert set(kept) & known, "two-letter names include real ones (Bo, Jo, ...)"
    assert not set(excluded) & known


def test_whole_names_train_through_the_cli_and_generate_from_the_carried_state(tmp_path):
    """Predict samples from the conditional the checkpoint learned, whatever formulation the predict config names."""
    whole_names = ("--data.init_args.formulation", "whole_names")
    run_cli("fit", small_run_args("lstm.yaml", tmp_path / "fit", None, *whole_names, "--trainer.max_steps", "3"))
    rows = read_metrics(tmp_path / "fit")
    assert 0 < last_value(rows, "val/loss") < last_value(rows, "train/loss") + 1
    (checkpoint,) = (tmp_path / "fit").rglob("last.ckpt")
    as_trained = predicted_names(checkpoint, tmp_path / "as_trained", *whole_names)
    config_says_windows = predicted_names(checkpoint, tmp_path / "config_says_windows")
    assert as_trained and as_trained == config_says_windows
    assert NameGenerator.load_from_checkpoint(checkpoint).hparams.formulation == "whole_names"
