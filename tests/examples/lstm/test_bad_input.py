"""The LSTM example's mistakes: one clear line, exit 2, and nothing earlier destroyed."""

import os
import subprocess
import sys

import pytest

from tests.helpers.runs import ROOT, run_cli, small_run_args
from tests.helpers.user_errors import assert_out_of_range, failing_run


@pytest.mark.parametrize(
    ("option", "value", "rule"),
    [
        ("--data.init_args.context_length", "0", "must be > 0"),
        ("--data.init_args.val_fraction", "1", "must be >= 0 and < 1"),
        ("--model.init_args.temperature", "0", "must be > 0"),
        ("--model.init_args.dropout", "1.5", "must be >= 0 and <= 1"),
    ],
)
def test_value_out_of_range_names_the_option(option, value, rule, tmp_path, capsys):
    assert_out_of_range(capsys, small_run_args("lstm.yaml", tmp_path), option, value, rule)


def test_missing_names_file(tmp_path, capsys):
    error = failing_run(
        capsys,
        "fit",
        small_run_args("lstm.yaml", tmp_path) + ["--data.init_args.names_path", str(tmp_path / "nope.txt")],
    )
    assert error.strip() == (
        f"error: names file {tmp_path / 'nope.txt'} does not exist; set --data.init_args.names_path (derive "
        "the default with scripts/prepare_pet_names.py)"
    )


def test_names_file_without_usable_names(tmp_path, capsys):
    names = tmp_path / "names.txt"
    names.write_text("R2D2\n\n¡Olé!\n")
    error = failing_run(
        capsys, "fit", small_run_args("lstm.yaml", tmp_path) + ["--data.init_args.names_path", str(names)]
    )
    assert "has no usable name: 3 of 3" in error


def test_failed_run_keeps_earlier_checkpoints_and_logs(tmp_path, capsys):
    run_cli("fit", small_run_args("lstm.yaml", tmp_path))
    before = {path: path.read_bytes() for path in tmp_path.rglob("*") if path.is_file()}
    assert any(path.name == "last.ckpt" for path in before) and any(path.name == "metrics.csv" for path in before)
    failing_run(
        capsys,
        "fit",
        small_run_args("lstm.yaml", tmp_path) + ["--data.init_args.names_path", str(tmp_path / "missing.txt")],
    )
    assert {path: path.read_bytes() for path in before} == before


def test_command_line_error_is_one_line_without_traceback(tmp_path):
    args = small_run_args("lstm.yaml", tmp_path) + ["--data.init_args.names_path", str(tmp_path / "missing.txt")]
    result = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "fit", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: names file")


# The cases against a folder holding an earlier run, compared byte for byte afterwards.
LSTM_SMALL = ["--model.init_args.hidden_size", "16", "--model.init_args.num_layers", "1"]


@pytest.fixture(scope="module")
def earlier_lstm_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("earlier")
    run_cli("fit", small_run_args("lstm.yaml", folder, None, *LSTM_SMALL))
    return folder


def files_of(folder) -> dict:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def truncated_checkpoint(folder, tmp_path):
    (last,) = folder.rglob("last.ckpt")
    half = tmp_path / "half.ckpt"
    half.write_bytes(last.read_bytes()[: last.stat().st_size // 2])
    return half


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ([], "error: predict needs a trained model: set --ckpt_path"),
        (["--model.init_args.optimizer.init_args.lr", "-3"], "error: --model.init_args.optimizer.init_args.lr must"),
        (["--ckpt_path", "last", "--model.init_args.hidden_size", "64"], "does not fit this model: network.lstm"),
        (["--ckpt_path", "last", "--model.init_args.num_layers", "2"], "parameters 4 missing there"),
        (["--data.init_args.names_path", "EMPTY"], "has no usable name: 0 of 0"),
        (["--ckpt_path", "HALF"], "cannot be read"),
        (["--trainer.max_epochs", "abc"], "error: --trainer.max_epochs expects int or None, got 'abc'"),
        (["--config", "BAD_YAML"], "is not valid YAML: "),
    ],
    ids=["predict-no-ckpt", "lr", "resume-hidden-size", "resume-layers", "empty-names", "truncated", "type", "yaml"],
)
def test_a_refused_run_prints_one_line_and_leaves_an_earlier_run_as_it_was(
    earlier_lstm_run, tmp_path, capsys, options, expected
):
    before = files_of(earlier_lstm_run)
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "bad.yaml").write_text("trainer:\n  max_epochs: [1\n")
    replacements = {
        "EMPTY": str(tmp_path / "empty.txt"),
        "HALF": str(truncated_checkpoint(earlier_lstm_run, tmp_path)),
        "BAD_YAML": str(tmp_path / "bad.yaml"),
    }
    options = [replacements.get(option, option) for option in options]
    subcommand = "predict" if not options else "fit"
    args = small_run_args("lstm.yaml", earlier_lstm_run, None, *LSTM_SMALL, *options)
    error = failing_run(capsys, subcommand, args)
    assert error.count("\n") == 1 and expected in error, error
    assert files_of(earlier_lstm_run) == before, "a refused run wrote into the earlier run's folder"
