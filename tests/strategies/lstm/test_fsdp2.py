"""The name generator trained and validated under fsdp2, then from its sharded checkpoint: `cli.py predict
--ckpt_path` a directory that fsdp2 wrote samples the names that the same checkpoint consolidated into one file
(`python -m trainrig.resume.consolidate`) gives, on one process or sharded on two. It trains as DDP does; a
tensor_parallel split it declares no plan for is refused."""

import subprocess
import sys

import pytest
import torch

from tests.helpers.media import media_tables
from tests.helpers.runs import ROOT, read_metrics, run_cli, small_run_args
from tests.helpers.sharded_runs import assert_fsdp2_refuses, assert_fsdp2_trains_as_ddp
from tests.helpers.strategy_runs import checkpoint_path, run_ok

FSDP2 = ("--trainer.strategy", "fsdp2", "--trainer.devices", "2")


def generated_names(checkpoint, log_dir, *processes: str) -> list[str]:
    """From this process, or with `processes` options from processes of their own."""
    args = [*small_run_args("lstm.yaml", log_dir, None, "--ckpt_path", str(checkpoint), *processes)]
    args += ["--data.init_args.num_names_to_generate", "100"]
    if processes:
        run_ok("predict", args)
    else:
        run_cli("predict", args)
    (names_file,) = log_dir.rglob("generated_names.txt")
    return names_file.read_text().splitlines()


@pytest.mark.slow  # CI budget: 39 s
def test_predict_generates_the_same_names_from_a_sharded_checkpoint_as_from_its_consolidated_file(tmp_path):
    # With validation: the names table samples on every process (a sharded model's forwards are collective), once.
    run_ok("fit", small_run_args("lstm.yaml", tmp_path / "fit", None, *FSDP2))
    assert [row["val/loss"] for row in read_metrics(tmp_path / "fit") if row.get("val/loss")]
    (table,) = media_tables(tmp_path / "fit", "generated_names")
    assert len(table) == 21
    sharded = checkpoint_path(tmp_path / "fit", "last.ckpt")
    assert sorted(path.name for path in sharded.iterdir()) == [".metadata", "__0_0.distcp", "__1_0.distcp", "meta.pt"]
    single_file = tmp_path / "names.ckpt"
    consolidate = [sys.executable, "-m", "trainrig.resume.consolidate", str(sharded), str(single_file)]
    result = subprocess.run(consolidate, cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    from_directory = generated_names(sharded, tmp_path / "from-directory")
    assert len(from_directory) == 100
    assert from_directory == generated_names(single_file, tmp_path / "from-file")
    # Sharded, each process samples other names in lockstep: as many forwards, whatever their names' lengths.
    assert from_directory == generated_names(sharded, tmp_path / "sharded", *FSDP2)
    # The names come from the checkpoint's weights (the same seed with other weights samples other names).
    other = torch.load(single_file, weights_only=False)
    other["state_dict"] = {name: tensor * 0.5 for name, tensor in other["state_dict"].items()}
    torch.save(other, tmp_path / "other.ckpt")
    assert generated_names(tmp_path / "other.ckpt", tmp_path / "from-other") != from_directory


def test_tensor_parallel_without_a_plan_fails_in_one_line_and_writes_nothing(capsys, tmp_path, shapes_root):
    tensor_parallel = ("--trainer.strategy.init_args.tensor_parallel", "2")
    message = "NameGenerator declares no tensor_parallel_plan(), so it cannot be split over tensor_parallel 2 processes"
    assert_fsdp2_refuses(capsys, tmp_path, shapes_root, "lstm.yaml", tensor_parallel, message)


@pytest.mark.slow  # 30 to 60 s on two idle cores
def test_fsdp2_trains_the_lstm_as_ddp_does(tmp_path, shapes_root):
    assert_fsdp2_trains_as_ddp(tmp_path, shapes_root, "lstm.yaml")
