"""Every example config trains for a few batches on CPU and leaves checkpoints and metrics behind."""

import math

import pytest

from tests.helpers.examples import logged
from tests.helpers.runs import EXAMPLE_CONFIGS, last_value, read_metrics, run_cli, small_run_args


@pytest.mark.smoke
@pytest.mark.parametrize("config", EXAMPLE_CONFIGS)
def test_fit_writes_checkpoints_and_namespaced_metrics(config, tmp_path, shapes_root):
    run_cli("fit", small_run_args(config, tmp_path, shapes_root))
    (run_dir,) = [path.parent for path in tmp_path.rglob("config.yaml")]
    checkpoints = sorted(path.name for path in (run_dir / "checkpoints").iterdir())
    assert "last.ckpt" in checkpoints and any(name.startswith("best-") for name in checkpoints)
    rows = read_metrics(tmp_path)
    for key in logged(config):
        assert math.isfinite(last_value(rows, key)), f"{key} is not finite"
    assert last_value(rows, "val/loss") > 0


def test_print_config_reproduces_the_run(tmp_path, shapes_root, capsys):
    args = small_run_args(EXAMPLE_CONFIGS[-1], tmp_path, shapes_root)
    with pytest.raises(SystemExit) as exit_info:
        run_cli("fit", [*args, "--print_config"])
    assert exit_info.value.code == 0
    printed = tmp_path / "printed.yaml"
    printed.write_text(capsys.readouterr().out)
    run_cli("fit", ["--config", str(printed)])
    assert "last.ckpt" in {path.name for path in tmp_path.rglob("*.ckpt")}
