"""Generated batch scripts on a real SLURM cluster of emulated hosts (slurmctld + one slurmd per host, munged), with
real requeues: each job's run directory is compared with the same run on one host, uninterrupted."""

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.padded_checkpoint import PADDED_CHECKPOINTS, assert_every_checkpoint_padded
from tests.helpers.run_dirs import RunDirectory, assert_same_run_directory
from tests.helpers.run_if import run_if
from tests.helpers.runs import ROOT
from tests.slurm.mlp.jobs import JOB_TIMEOUT_S, job_log, mlp_overrides, submit, write_script
from trainrig.testing.load import LOAD_MODES, saturated_cpu
from trainrig.testing.slurm import SlurmCluster

pytestmark = run_if(executables=("slurmctld", "slurmd", "munged", "sbatch", "scontrol"), emulated_hosts=True)

TWO_NODES = ("--nodes", "2", "--config", "configs/mlp.yaml")
# Long enough to be stopped mid-epoch: 2 epochs of 3 steps (the suite's shrunken MLP data).
TWO_EPOCHS = ("--trainer.max_epochs", "2")


@pytest.fixture
def cluster():
    with SlurmCluster(nodes=2) as running:
        yield running


@pytest.fixture(scope="module")
def one_host_run(tmp_path_factory):
    """The same job as two processes on this one machine, with Lightning's own launcher; each run once per module."""
    runs: dict[tuple, RunDirectory] = {}

    def run(*overrides: str, strategy: str = "ddp") -> RunDirectory:
        if (overrides, strategy) not in runs:
            log_dir = tmp_path_factory.mktemp("one-host")
            command = [sys.executable, "cli.py", "fit", "--config", "configs/mlp.yaml"]
            command += [*mlp_overrides(log_dir, *overrides), "--trainer.strategy", strategy]
            command += ["--trainer.accelerator", "cpu", "--trainer.devices", "2"]
            result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=JOB_TIMEOUT_S)
            assert result.returncode == 0, result.stderr[-3000:]
            runs[overrides, strategy] = RunDirectory.only_one_under(log_dir)
        return runs[overrides, strategy]

    return run


def finished_job(cluster: SlurmCluster, script: Path, job_id: int, state: str = "COMPLETED") -> dict[str, str]:
    fields = cluster.wait_for(job_id, "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", timeout=JOB_TIMEOUT_S)
    assert fields["JobState"] == state, f"{fields['JobState']} {fields['ExitCode']}\n{job_log(script, job_id)[-4000:]}"
    return fields


def test_two_node_ddp_job_equals_the_one_host_run(cluster, one_host_run, tmp_path):
    """`srun` on two emulated hosts, one process each, through Lightning's SLURM environment: the run directory is
    the one two processes on one host leave (weights bit for bit, every metrics row)."""
    script = write_script(tmp_path, *TWO_NODES, "--", *mlp_overrides(tmp_path / "slurm"))
    job_id = submit(cluster, script)
    fields = finished_job(cluster, script, job_id)
    assert fields["NodeList"] == "h[2-3]" and fields["Restarts"] == "0"
    assert_same_run_directory(RunDirectory.only_one_under(tmp_path / "slurm"), one_host_run())


@pytest.mark.parametrize(
    ("strategy", "class_name"),
    [("pipeline", "PipelineStrategy"), pytest.param("fsdp2", "FSDP2Strategy", marks=pytest.mark.slow)],
)
@pytest.mark.slow  # CI budget: 40 s; the two-node DDP job stays
def test_two_node_model_parallel_job_equals_the_one_host_run(cluster, one_host_run, tmp_path, strategy, class_name):
    """`--trainer.strategy pipeline` after `--`: the model's two stages on the two hosts; `fsdp2` (-m slow): the
    parameters sharded over them."""
    chosen = ("--trainer.strategy", strategy)
    script = write_script(tmp_path, *TWO_NODES, "--", *mlp_overrides(tmp_path / "slurm"), *chosen)
    job_id = submit(cluster, script)
    finished_job(cluster, script, job_id)
    assert class_name in (tmp_path / "slurm" / "mlp" / "version_0" / "config.yaml").read_text()
    assert_same_run_directory(RunDirectory.only_one_under(tmp_path / "slurm"), one_host_run(strategy=strategy))


@pytest.mark.parametrize("load", ["idle", pytest.param("saturated", marks=pytest.mark.slow)])
def test_scontrol_requeue_mid_epoch_continues_the_run_exactly(one_host_run, tmp_path, load):
    """`scontrol requeue` at step 4 (epoch 2 of 2, mid-epoch): SLURM sends the tasks SIGTERM, they save last.ckpt at
    step 5 (two processes settle a stop request a step later: trainrig/resume/preemption.py) and exit 143, SLURM
    runs the script again with SLURM_RESTART_COUNT=1, and it continues in the same run directory, which ends as the
    uninterrupted run's. A later, new sbatch of the same script is a new run. `saturated` (-m slow): the cluster
    starts and the job runs, stops and runs again with every core kept busy (trainrig/testing/load.py). Every
    checkpoint is of a real model's size (over 100 MB, padded), and each the requeued job leaves holds all of it."""
    uninterrupted = one_host_run(*TWO_EPOCHS)  # made before the load starts
    requeue = ["--trainer.callbacks+=tests.slurm.mlp.events.RequeueAtStep", "--trainer.callbacks.step", "4"]
    requeue += ["--trainer.callbacks.once_marker", str(tmp_path / "requeued"), PADDED_CHECKPOINTS]
    script = write_script(tmp_path, *TWO_NODES, "--", *mlp_overrides(tmp_path / "slurm", *TWO_EPOCHS, *requeue))
    with saturated_cpu(LOAD_MODES[load]), SlurmCluster(nodes=2) as cluster:
        job_id = submit(cluster, script)
        fields = finished_job(cluster, script, job_id)
        log = job_log(script, job_id)
        assert fields["Restarts"] == "1", log[-3000:]
        assert "DUE TO JOB REQUEUE" in log and "preempted at step 5 by SIGTERM" in log, log[-3000:]
        assert log.count("Exited with exit code 143") == 2, log[-3000:]  # both tasks, preempted
        assert "resume: continuing from" in log and "(step 5)" in log, log[-3000:]
        assert "SLURM auto-requeueing enabled" not in log and not list((tmp_path / "slurm").rglob("hpc_ckpt*"))
        resumed = RunDirectory.only_one_under(tmp_path / "slurm")
        assert_same_run_directory(resumed, uninterrupted)
        assert_every_checkpoint_padded(resumed.path)

        again = submit(cluster, script)
        finished_job(cluster, script, again)
    assert "resume:" not in job_log(script, again)
    assert sorted(path.name for path in resumed.path.parent.iterdir()) == ["version_0", "version_1"]


def test_bad_input_exits_2_and_is_not_requeued(cluster, tmp_path):
    """A setting refused when the model is built (an unknown option or a wrong type is refused already when the
    script is written): every task exits 2, the job FAILED with exit code 2, never requeued, nothing written."""
    bad = ("--model.init_args.optimizer.init_args.lr", "-7.5")
    script = write_script(tmp_path, *TWO_NODES, "--", *mlp_overrides(tmp_path / "slurm"), *bad)
    job_id = submit(cluster, script)
    fields = finished_job(cluster, script, job_id, state="FAILED")
    assert fields["ExitCode"] == "2:0", fields
    time.sleep(3)  # a requeue would show within the cluster's requeue delay
    fields = cluster.job(job_id)
    assert (fields["JobState"], fields["Restarts"]) == ("FAILED", "0")
    assert not (tmp_path / "slurm").exists()
    lines = [line for line in job_log(script, job_id).splitlines() if "-7.5" in line and "error" in line.lower()]
    assert lines, job_log(script, job_id)[-2000:]


@pytest.mark.slow  # two runs of a job with a 2-minute time limit: about 3 minutes
def test_the_time_limit_signal_checkpoints_requeues_and_continues_exactly(cluster, one_host_run, tmp_path):
    """`--time 2 --signal-lead 45`: ahead of the limit SLURM sends USR1 to the batch shell, which passes SIGTERM to
    the tasks; they save last.ckpt and exit 143, the script requeues its job, and the next run continues the same
    run directory to the uninterrupted run's end. No task ever got SIGUSR1, so no hpc checkpoint exists."""
    slow = ("--trainer.callbacks+=tests.slurm.mlp.events.SlowSteps", "--trainer.callbacks.seconds", "6")
    epochs = ("--trainer.max_epochs", "4")
    limit = ("--time", "2", "--signal-lead", "45")
    script = write_script(tmp_path, *TWO_NODES, *limit, "--", *mlp_overrides(tmp_path / "slurm", *epochs, *slow))
    job_id = submit(cluster, script)
    fields = finished_job(cluster, script, job_id)
    log = job_log(script, job_id)
    assert int(fields["Restarts"]) >= 1, log[-3000:]
    assert "time limit near: checkpoint saved, requeueing job" in log and "by SIGTERM: saved" in log, log[-3000:]
    assert "DUE TO TIME LIMIT" not in log, log[-3000:]
    assert "SLURM auto-requeueing enabled" not in log and not list((tmp_path / "slurm").rglob("hpc_ckpt*"))
    assert_same_run_directory(RunDirectory.only_one_under(tmp_path / "slurm"), one_host_run(*epochs))


@pytest.mark.slow  # CI budget (about 60 s): the scontrol requeue test above takes the same path back
def test_a_lost_node_with_requeue_ends_with_the_uninterrupted_weights(cluster, one_host_run, tmp_path):
    """kill -9 of every process on the second node (its slurmd and its task) after the first epoch's checkpoint:
    SLURM marks the node down and requeues the job (`--requeue`); once the node's slurmd is back, the job runs again
    from last.ckpt and ends with the uninterrupted run's directory, weights bit for bit."""
    slow = ("--trainer.callbacks+=tests.slurm.mlp.events.SlowSteps", "--trainer.callbacks.seconds", "1")
    script = write_script(tmp_path, *TWO_NODES, "--", *mlp_overrides(tmp_path / "slurm", *TWO_EPOCHS, *slow))
    job_id = submit(cluster, script)
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while not list((tmp_path / "slurm").rglob("last.ckpt")):
        assert time.monotonic() < deadline and cluster.job(job_id)["JobState"] in ("PENDING", "RUNNING")
        time.sleep(0.2)
    lost = cluster.nodes[1]
    lost.lose()
    cluster.wait_for(job_id, "PENDING", timeout=60)
    cluster.start_slurmd(lost)
    fields = finished_job(cluster, script, job_id)
    assert fields["Restarts"] == "1", job_log(script, job_id)[-3000:]
    resumed = RunDirectory.only_one_under(tmp_path / "slurm")
    assert "resume: continuing from" in job_log(script, job_id)
    assert_same_run_directory(resumed, one_host_run(*TWO_EPOCHS))
