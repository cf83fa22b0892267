"""A run prints what its user can act on: no tips for products the project does not use, no deprecation noise from
the libraries, no column of zeros; warnings about the run's own settings still show."""

import os
import subprocess
import sys

import pytest

from tests.helpers.runs import EXAMPLE_CONFIGS, ROOT, small_run_args

# Lightning's litlogger tip, torch's LeafSpec deprecation (warned from Lightning's code), the summary's FLOPs column.
NOISE = ("litlogger", "LeafSpec", "FLOPs", "Flops")


@pytest.mark.smoke
def test_a_run_prints_no_library_noise_and_still_warns(tmp_path, shapes_root):
    config = EXAMPLE_CONFIGS[-1]  # the last example kept is the fastest
    args = small_run_args(
        config, tmp_path, shapes_root, "--trainer.enable_model_summary", "true", "--trainer.log_every_n_steps", "50"
    )
    result = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "fit", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert result.returncode == 0, result.stderr
    output = result.stdout + result.stderr
    assert "Total params" in output  # the summary itself is still there
    assert "smaller than the logging interval" in output  # Lightning's warning about this run's settings
    assert [word for word in NOISE if word in output] == []
