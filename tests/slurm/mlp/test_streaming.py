"""The staged MLP streamed from shards (tests/helpers/mlp/streamed_runs.py) as a generated SLURM batch job on a real
cluster of emulated hosts (tests/slurm/mlp/test_jobs.py runs the map-style job), the shards on the file system every
node shares: a requeue mid-epoch continues the run exactly."""

import subprocess
import sys

import pytest

from tests.helpers.mlp.streamed_runs import assert_streamed, write_config, write_shards
from tests.helpers.run_dirs import RunDirectory, assert_same_run_directory
from tests.helpers.run_if import run_if
from tests.helpers.runs import ROOT
from tests.slurm.mlp.jobs import JOB_TIMEOUT_S, job_log, submit, write_script
from trainrig.testing.slurm import SlurmCluster

pytestmark = run_if(executables=("slurmctld", "slurmd", "munged", "sbatch", "scontrol"), emulated_hosts=True)

STREAMING_CONFIG = "configs/mlp_streaming.yaml"  # the generator's --config, relative to the project root


@pytest.mark.slow  # CI budget: 69-100 s on 2 busy cores; the torchrun job across hosts streams in the default run
def test_scontrol_requeue_mid_epoch_of_a_streamed_job_continues_the_run_exactly(tmp_path, shapes_root):
    """`scontrol requeue` after step 5 (2 processes, 4 steps an epoch: the second epoch's first step): the tasks save
    last.ckpt a step later and exit 143, SLURM runs the script again, and the run continues from the shards' position
    to the run directory two processes on one host leave uninterrupted."""
    config = write_config(tmp_path / "streamed.yaml", tmp_path / "shards", shapes_root)
    code, printed = write_shards(config)
    assert code == 0, printed[-3000:]

    one_host = tmp_path / "one-host"
    command = [sys.executable, "cli.py", "fit", "--config", STREAMING_CONFIG, "--config", str(config)]
    command += ["--trainer.logger.init_args.save_dir", str(one_host), "--trainer.default_root_dir", str(one_host)]
    command += ["--trainer.strategy", "ddp", "--trainer.accelerator", "cpu", "--trainer.devices", "2"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=JOB_TIMEOUT_S)
    assert result.returncode == 0, result.stderr[-3000:]

    slurm = tmp_path / "slurm"
    job = ["--config", str(config), "--trainer.logger.init_args.save_dir", str(slurm)]
    job += ["--trainer.default_root_dir", str(slurm)]  # where Lightning's own SLURM handler would put hpc_ckpt_N.ckpt
    job += ["--trainer.callbacks+=tests.slurm.mlp.events.RequeueAtStep", "--trainer.callbacks.step", "5"]
    job += ["--trainer.callbacks.once_marker", str(tmp_path / "requeued")]
    script = write_script(tmp_path, "--nodes", "2", "--config", STREAMING_CONFIG, "--", *job)
    with SlurmCluster(nodes=2) as cluster:
        job_id = submit(cluster, script)
        fields = cluster.wait_for(job_id, "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", timeout=JOB_TIMEOUT_S)
    log = job_log(script, job_id)
    assert (fields["JobState"], fields["Restarts"]) == ("COMPLETED", "1"), log[-3000:]
    assert "preempted at step 6 by SIGTERM" in log and "resume: continuing from" in log, log[-3000:]
    assert_same_run_directory(RunDirectory.only_one_under(slurm), RunDirectory.only_one_under(one_host), "requeued")
    assert_streamed(slurm, tmp_path / "shards")
