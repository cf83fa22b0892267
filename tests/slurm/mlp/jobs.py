"""The SLURM tests' pieces: a batch script from the generator, submitted from the project root to a cluster of
emulated hosts, running the suite's small MLP job; and what a job left behind."""

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.runs import ROOT, small_run_args
from trainrig.testing.slurm import SlurmCluster

JOB_TIMEOUT_S = 240


def mlp_overrides(log_dir: Path, *extra: str) -> list[str]:
    """The suite's small MLP run writing under `log_dir`, as `cli.py fit` options after the generator's `--`."""
    args = small_run_args("mlp.yaml", log_dir, log_dir.parent / "shapes")
    # The root directory is where Lightning's own SLURM handler would put hpc_ckpt_N.ckpt.
    root = ["--trainer.default_root_dir", str(log_dir)]
    return args[2:] + ["--trainer.deterministic", "true", *root, *extra]  # the generator adds --config


def write_script(tmp_path: Path, *generator_args: str) -> Path:
    """The generator's batch script for `generator_args`, run from the project root as a user would."""
    script = tmp_path / "job.sbatch"
    log = tmp_path / "slurm-%j.out"
    command = [sys.executable, "-m", "trainrig.slurm.sbatch", "--log", str(log), "--output", str(script)]
    result = subprocess.run([*command, *generator_args], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return script


def submit(cluster: SlurmCluster, script: Path) -> int:
    """`sbatch` from the project root with this Python first on PATH; gloo talks over the emulated network."""
    path = f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    return cluster.submit(script, ROOT, PATH=path, GLOO_SOCKET_IFNAME="eth0")


def job_log(script: Path, job_id: int) -> str:
    path = script.parent / f"slurm-{job_id}.out"
    return path.read_text() if path.exists() else ""
