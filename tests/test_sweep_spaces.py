"""Every example's shipped search space (configs/sweeps/<example>.yaml) runs: one shrunk trial each."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.runs import EXAMPLE_CONFIGS, ROOT, small_run_args

SPACES = sorted(path.name for path in (ROOT / "configs" / "sweeps").glob("*.yaml"))


def test_every_example_has_a_search_space():
    assert SPACES == sorted(EXAMPLE_CONFIGS)


@pytest.mark.parametrize("config", SPACES)
def test_a_shipped_search_space_runs_a_trial(config, tmp_path, shapes_root):
    command = [
        sys.executable,
        str(ROOT / "sweep.py"),
        *small_run_args(config, tmp_path, shapes_root),
        "--sweep",
        str(ROOT / "configs" / "sweeps" / config),
        "--sweep.trials",
        "1",
    ]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    sweep_dir = next(Path(tmp_path).glob("sweep_*"))
    assert (sweep_dir / "best.yaml").is_file(), sorted(p.name for p in sweep_dir.iterdir())
