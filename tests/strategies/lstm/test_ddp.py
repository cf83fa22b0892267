"""`--trainer.strategy ddp --trainer.devices 2` on CPU (gloo): the LSTM trains and generates names, only rank 0 writes
(how its batches shard by rank is in tests/examples/lstm/unit/test_pet_names_data.py)."""

from pathlib import Path

import pytest

from tests.helpers.runs import ROOT, read_metrics, small_run_args
from tests.helpers.strategy_runs import checkpoint_path, run_ok

DDP = ("--trainer.strategy", "ddp", "--trainer.devices", "2")


def predicted_names(checkpoint: Path, log_dir: Path, *options: str) -> list[str]:
    run_ok(
        "predict",
        [
            "--config",
            str(ROOT / "configs" / "lstm.yaml"),
            "--trainer.logger.init_args.save_dir",
            str(log_dir),
            "--trainer.enable_progress_bar",
            "false",
            "--data.init_args.num_names_to_generate",
            "41",
            "--model.init_args.exclude_training_names",
            "false",
            "--ckpt_path",
            str(checkpoint),
            *options,
        ],
    )
    (names_file,) = log_dir.rglob("generated_names.txt")
    return names_file.read_text().splitlines()


@pytest.mark.slow  # CI budget: 33 s
def test_lstm_trains_and_generates_names_on_two_processes(tmp_path):
    """Each name drawn from its own seed: two processes write, once and in order, the names one process writes,
    not each rank's draws from a shared seed (half the names, twice)."""
    run_ok("fit", small_run_args("lstm.yaml", tmp_path / "fit", None, *DDP))
    rows = read_metrics(tmp_path / "fit")
    assert [row["val/loss"] for row in rows if row.get("val/loss")]
    checkpoint = checkpoint_path(tmp_path / "fit", "last.ckpt")
    on_two = predicted_names(checkpoint, tmp_path / "two", *DDP)
    assert len(on_two) == 41  # 21 and 20 per rank (the sampler repeats one item to even them out), written once
    assert on_two == predicted_names(checkpoint, tmp_path / "one", "--trainer.devices", "1")
    assert len(set(on_two)) > 30, "names drawn alike on both ranks would repeat every one"
