"""Every example config trains for a few batches on CPU and leaves checkpoints and metrics behind; each example's own
fit and predict behaviour is in tests/examples/<example>/test_fit.py."""

import math

import pytest

from tests.helpers.examples import logged
from tests.helpers.gpu import BF16, ONE_GPU
from tests.helpers.ran import assert_ran_as
from tests.helpers.run_if import run_if
from tests.helpers.runs import (
    EXAMPLE_CONFIGS,
    assert_fit_left_checkpoints_and_metrics,
    last_value,
    read_metrics,
    run_cli,
    small_run_args,
)


@pytest.mark.smoke
@pytest.mark.parametrize("config", EXAMPLE_CONFIGS)
def test_fit_writes_checkpoints_and_namespaced_metrics(config, tmp_path, shapes_root):
    run_cli("fit", small_run_args(config, tmp_path, shapes_root))
    rows = assert_fit_left_checkpoints_and_metrics(tmp_path, config)
    assert last_value(rows, "val/loss") > 0


@run_if(min_cuda_devices=1)
@pytest.mark.parametrize("config", EXAMPLE_CONFIGS)
def test_fit_on_a_gpu_in_bf16_trains_there(config, tmp_path, shapes_root):
    run_cli("fit", small_run_args(config, tmp_path, shapes_root, *ONE_GPU, *BF16))
    assert_ran_as(tmp_path, strategy="SingleDeviceStrategy", device="cuda:0", precision="bf16-mixed")
    rows = read_metrics(tmp_path)
    for key in logged(config):
        assert math.isfinite(last_value(rows, key)), f"{key} is not finite"


def printed_config(capsys, args: list[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        run_cli("fit", [*args, "--print_config"])
    assert exit_info.value.code == 0
    return capsys.readouterr().out


def test_print_config_reproduces_the_run(tmp_path, shapes_root, capsys):
    """The printed config, run again, is the same config (printed again, the same text) and trains the same run."""
    direct, again = tmp_path / "direct", tmp_path / "again"
    args = small_run_args(EXAMPLE_CONFIGS[-1], direct, shapes_root)
    printed = tmp_path / "printed.yaml"
    printed.write_text(printed_config(capsys, args))
    rerun = ["--config", str(printed), "--trainer.logger.init_args.save_dir", str(again)]
    same_folder = [*args, "--trainer.logger.init_args.save_dir", str(again)]
    assert printed_config(capsys, rerun) == printed_config(capsys, same_folder)
    run_cli("fit", args)
    run_cli("fit", rerun)
    losses = [[row["train/loss"] for row in read_metrics(run) if row.get("train/loss")] for run in (direct, again)]
    assert losses[0] and losses[0] == losses[1]
