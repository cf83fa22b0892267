"""Sweep trials as SLURM jobs (`--sweep.slurm_nodes`) on a real cluster of emulated hosts with job accounting
(slurmctld, a slurmd per node, slurmdbd on MariaDB): the driver runs on the controller's host as on a login node and
submits each trial with submitit; every trial is a 2-node DDP job of the suite's small MLP."""

import csv
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest

from tests.helpers.ran import assert_ran_as
from tests.helpers.run_if import run_if
from tests.helpers.runs import ROOT, small_run_args
from tests.sweeps.studies import study, study_with_a_far_better_trial, sweep_file
from trainrig.testing.slurm import SlurmCluster

pytestmark = run_if(
    executables=("slurmctld", "slurmd", "munged", "sbatch", "scontrol", "slurmdbd", "mariadbd"),
    emulated_hosts=True,
    packages=("submitit", "optuna"),
)

LR = "model.init_args.optimizer.init_args.lr"
SPACE = {LR: {"type": "float", "low": 1e-3, "high": 1e-2, "log": True}}
TRIALS_ON_TWO_NODES = dict(slurm_nodes=2, sampler="random", pruner="none")
SWEEP_TIMEOUT_S = 420


@pytest.fixture(scope="module")
def cluster():
    """One cluster for the module (its accounting database takes about 10 s to set up): each test's trials are
    jobs of their own, and each test waits until its jobs have left the queue."""
    with SlurmCluster(nodes=2, accounting=True) as running:
        yield running


def sweep_command(log_dir: Path, *extra: str) -> list[str]:
    """`sweep.py` over the suite's small MLP run writing under `log_dir`."""
    command = [sys.executable, str(ROOT / "sweep.py"), *small_run_args("mlp.yaml", log_dir, log_dir.parent / "shapes")]
    return [*command, "--trainer.deterministic", "true", *extra]


def login_environment(cluster: SlurmCluster) -> dict[str, str]:
    """The cluster's client environment with this Python first on PATH; gloo talks over the emulated network."""
    path = f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    return cluster.environment(PATH=path, GLOO_SOCKET_IFNAME="eth0")


def run_sweep(cluster: SlurmCluster, log_dir: Path, *extra: str) -> subprocess.CompletedProcess:
    """The sweep run to its end from the project root on the controller's host, the login node."""
    command = sweep_command(log_dir, *extra)
    return cluster.controller.run(command, env=login_environment(cluster), cwd=ROOT, timeout=SWEEP_TIMEOUT_S)


def job_ids(log_dir, trials: int) -> list[str]:
    return [(log_dir / "sweep_mlp" / f"trial_{number}" / "slurm_job").read_text() for number in range(trials)]


def ended(cluster: SlurmCluster, job_id: str) -> dict[str, str]:
    """The job's fields once SLURM has ended it: the driver learns that a trial finished from the trial's reports,
    while its job may still be running or completing for a moment."""
    return cluster.wait_for(int(job_id), "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", timeout=60)


def test_two_trials_each_a_two_node_ddp_slurm_job(cluster, tmp_path):
    """Two trials at once, each its own 2-node job: both complete with the value their rank 0 reported, each run's
    checkpoint records 2 processes on 2 nodes set up by SLURM, and the jobs ran on both nodes and left the queue."""
    settings = sweep_file(tmp_path / "sweep.json", SPACE, trials=2, parallel=2, **TRIALS_ON_TWO_NODES)
    result = run_sweep(cluster, tmp_path / "logs", "--sweep", settings)
    assert result.returncode == 0, result.stderr[-3000:]
    trials = study(tmp_path / "logs", "mlp").trials
    assert [trial.state.name for trial in trials] == ["COMPLETE", "COMPLETE"], result.stderr[-3000:]
    for trial in trials:
        trial_dir = tmp_path / "logs" / "sweep_mlp" / f"trial_{trial.number}"
        reports = (trial_dir / "channel" / "reports.jsonl").read_text().splitlines()
        assert trial.value == json.loads(reports[-1])["value"]
        assert_ran_as(trial_dir, strategy="DDPStrategy", processes=2, nodes=2, environment="SLURMEnvironment")
    for job_id in job_ids(tmp_path / "logs", 2):
        fields = ended(cluster, job_id)
        assert (fields["JobState"], fields["NodeList"], fields["Restarts"]) == ("COMPLETED", "h[2-3]", "0"), fields


@pytest.mark.slow  # CI budget: 32 s
def test_a_pruned_trial_stops_and_its_job_leaves_the_queue(cluster, tmp_path):
    """A study whose one completed trial is far better: the SLURM trial is pruned at its first validation (a third
    of an epoch), both ranks stop there, and its job ended and left the queue."""
    study_with_a_far_better_trial(
        tmp_path / "logs",
        "mlp",
        {LR: 1e-3},
        {LR: optuna.distributions.FloatDistribution(1e-3, 1e-2, log=True)},
        epochs=1,
    )
    settings = dict(TRIALS_ON_TWO_NODES, pruner="median", pruner_startup_trials=1)
    sweep = sweep_file(tmp_path / "sweep.json", SPACE, trials=2, **settings)
    result = run_sweep(cluster, tmp_path / "logs", "--trainer.val_check_interval", "1", "--sweep", sweep)
    assert result.returncode == 0, result.stderr[-3000:]
    trial = study(tmp_path / "logs", "mlp").trials[1]
    assert trial.state.name == "PRUNED" and list(trial.intermediate_values) == [333], result.stderr[-3000:]
    job_id = (tmp_path / "logs" / "sweep_mlp" / "trial_1" / "slurm_job").read_text()
    assert ended(cluster, job_id)["JobState"] == "COMPLETED"
    assert job_id not in cluster.client(["squeue", "--noheader", "--format=%i"]).stdout.split()


@pytest.mark.slow  # CI budget (about 60 s); the default set's two tests cover submission and the channel
def test_bad_input_in_a_trial_exits_2_and_is_not_submitted_again(cluster, tmp_path):
    """A metric no validation logs: the trial's ranks exit 2 in their one job, which SLURM does not requeue and the
    driver does not submit again; the sweep stops with the one-line error, exit 2."""
    settings = sweep_file(tmp_path / "sweep.json", SPACE, trials=2, metric="val/nothing", **TRIALS_ON_TWO_NODES)
    result = run_sweep(cluster, tmp_path / "logs", "--sweep", settings)
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.strip().splitlines()[-1].startswith("error: --sweep.metric val/nothing is not logged")
    assert result.stderr.count("submitted") == 1, result.stderr
    (job_id,) = job_ids(tmp_path / "logs", 1)
    time.sleep(3)  # a requeue would show within the cluster's requeue delay
    fields = ended(cluster, job_id)
    assert (fields["JobState"], fields["Restarts"]) == ("COMPLETED", "0"), fields


def start_sweep(cluster: SlurmCluster, log_dir: Path, stderr: Path, *extra: str) -> subprocess.Popen:
    """`run_sweep`'s command started on the login node and left running, its stderr written to `stderr`."""
    with stderr.open("w") as output:
        return cluster.controller.popen(
            sweep_command(log_dir, *extra), env=login_environment(cluster), cwd=ROOT, stderr=output, text=True
        )


def wait_for_a_checkpoint(driver: subprocess.Popen, trial_dir: Path, stderr: Path) -> None:
    """Until the trial's training saved its first `last.ckpt` (an epoch's end), its job still running."""
    deadline = time.monotonic() + SWEEP_TIMEOUT_S
    while not list(trial_dir.rglob("last.ckpt")):
        assert driver.poll() is None, f"the sweep ended before a checkpoint: {stderr.read_text()[-3000:]}"
        assert time.monotonic() < deadline, "no checkpoint"
        time.sleep(0.2)


def signalled_at_a_checkpoint(
    cluster: SlurmCluster, logs: Path, trial_dir: Path, stderr: Path, command: tuple[str, ...], signum: int
) -> int:
    """Starts the sweep, sends its driver `signum` once the trial saved a checkpoint; the driver's exit status."""
    driver = start_sweep(cluster, logs, stderr, *command)
    try:
        wait_for_a_checkpoint(driver, trial_dir, stderr)
        driver.send_signal(signum)
        return driver.wait(timeout=120)
    finally:
        driver.kill()
        driver.wait()


def queued(cluster: SlurmCluster) -> list[str]:
    return cluster.client(["squeue", "--noheader", "--format=%i"]).stdout.split()


# A trial that trains for many short epochs: `last.ckpt` at the end of the first, long before the last.
LONG_TRIAL = ("--trainer.max_epochs", "12")


@pytest.mark.slow  # 55-75 s here: a trial stopped, then run again from its checkpoint to its end
def test_a_stopped_sweep_continues_its_slurm_trial_from_the_checkpoint_with_the_same_command(cluster, tmp_path):
    """SIGTERM to the driver once its trial's job saved a checkpoint: the job is cancelled, its ranks checkpoint and
    exit 143, it leaves the queue, and the driver exits 143 as it does with local trials. The same command submits
    the trial again as a new job, which continues from the checkpoint in the same run folder to a complete trial."""
    logs = tmp_path / "logs"
    trial_dir = logs / "sweep_mlp" / "trial_0"
    settings = sweep_file(tmp_path / "sweep.json", SPACE, trials=1, **TRIALS_ON_TWO_NODES)
    command = (*LONG_TRIAL, "--sweep", settings)
    stderr = tmp_path / "first.err"
    assert signalled_at_a_checkpoint(cluster, logs, trial_dir, stderr, command, signal.SIGTERM) == 143, (
        stderr.read_text()[-3000:]
    )
    first = stderr.read_text()
    assert "sweep: trial 0 stopped with a checkpoint" in first, first[-3000:]
    stopped_job = (trial_dir / "slurm_job").read_text()
    cluster.wait_for(int(stopped_job), "CANCELLED", timeout=60)  # COMPLETING while SLURM cleans up after its tasks
    assert stopped_job not in queued(cluster)
    assert study(logs, "mlp").trials[0].state.name == "RUNNING"

    result = run_sweep(cluster, logs, *command)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "trial 0 was interrupted; it continues from its last checkpoint" in result.stderr
    (trial,) = study(logs, "mlp").trials
    assert trial.state.name == "COMPLETE", result.stderr[-3000:]
    job_id = (trial_dir / "slurm_job").read_text()
    assert job_id != stopped_job and ended(cluster, job_id)["JobState"] == "COMPLETED"
    log = (trial_dir / "trial.log").read_text()
    assert "exiting with status 143" in log.split("resume: continuing from")[0], "the cancelled job's ranks saved"
    resumed_steps = {int(step) for step in re.findall(r"resume: continuing from \S+ \(step (\d+)\)", log)}
    assert len(resumed_steps) == 1 and resumed_steps.pop() >= 3, "resumed from the checkpoint, not from zero"
    (run_folder,) = {path.parent for path in trial_dir.rglob("metrics.csv")}
    steps = [int(row["step"]) for row in csv.DictReader((run_folder / "metrics.csv").open()) if row.get("step")]
    assert steps == sorted(steps) and max(steps) == 12 * 3 - 1, "one run folder continued to the last step"
    reports = (trial_dir / "channel" / "reports.jsonl").read_text().splitlines()
    assert trial.value == json.loads(reports[-1])["value"]
    assert job_id not in queued(cluster)


@pytest.mark.slow  # 30-55 s here: one trial's job, watched by two drivers in turn
def test_a_sweep_killed_outright_watches_its_running_slurm_job_instead_of_submitting_it_again(cluster, tmp_path):
    """SIGKILL to the driver: its trial's job keeps running. The same command finds the job id in the trial's folder
    and waits for that job, which completes the trial: one submission, one job, no restart."""
    logs = tmp_path / "logs"
    trial_dir = logs / "sweep_mlp" / "trial_0"
    settings = sweep_file(tmp_path / "sweep.json", SPACE, trials=1, **TRIALS_ON_TWO_NODES)
    command = (*LONG_TRIAL, "--sweep", settings)
    stderr = tmp_path / "first.err"
    signalled_at_a_checkpoint(cluster, logs, trial_dir, stderr, command, signal.SIGKILL)
    job_id = (trial_dir / "slurm_job").read_text()
    assert cluster.job(int(job_id))["JobState"] == "RUNNING", "the job outlives its driver"

    result = run_sweep(cluster, logs, *command)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"trial_0: SLURM job {job_id} still runs; watching it" in result.stderr
    assert stderr.read_text().count("submitted") == 1 and "submitted" not in result.stderr, result.stderr
    (trial,) = study(logs, "mlp").trials
    assert trial.state.name == "COMPLETE", result.stderr[-3000:]
    assert (trial_dir / "slurm_job").read_text() == job_id
    fields = ended(cluster, job_id)
    assert (fields["JobState"], fields["Restarts"]) == ("COMPLETED", "0"), fields
    log = (trial_dir / "trial.log").read_text()
    assert "continuing from" not in log, "trained once, in its one job"
    reports = (trial_dir / "channel" / "reports.jsonl").read_text().splitlines()
    assert trial.value == json.loads(reports[-1])["value"]
