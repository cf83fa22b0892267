"""The LSTM example's own fit and predict behaviour: perplexity, generated names."""

import math

import pytest

from tests.helpers.runs import last_value, read_metrics, run_cli, small_run_args


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
