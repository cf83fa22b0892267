"""What a SLURM sweep's driver reads of a trial's folder: submitit unpickles each task's result there, so the driver
reads it only from a folder no other user can write. No cluster: a trial whose tasks left results reads them before it
asks SLURM anything."""

import os
import pickle
import stat
import sys
from pathlib import Path

import pytest
import submitit

from tests.helpers.hostile import hostile_pickle
from tests.helpers.run_if import missing, run_if
from trainrig.errors import UserInputError
from trainrig.sweeps import trials
from trainrig.sweeps.placements.slurm import Options
from trainrig.sweeps.slurm_trials import JOB_ID, SUBMITIT, SlurmTrial, SlurmTrials, run_task

pytestmark = run_if(packages=("submitit", "optuna"))

JOB = "4242"


@pytest.fixture
def trial_dir(tmp_path) -> Path:
    """A trial's folder and submitit's in it, as the driver makes them."""
    directory = tmp_path / "sweep_x" / "trial_0"
    trials.private_folder(directory / SUBMITIT)
    return directory


def finished_trial(trial_dir: Path) -> SlurmTrial:
    return SlurmTrial(submitit.SlurmJob(folder=trial_dir / SUBMITIT, job_id=JOB, tasks=(0,)), trial_dir)


def result_path(trial_dir: Path) -> Path:
    return finished_trial(trial_dir).job.paths.result_pickle


def test_a_result_in_the_users_own_folder_is_the_trials_exit_status(trial_dir):
    result_path(trial_dir).write_bytes(pickle.dumps(("success", 143)))
    assert finished_trial(trial_dir).poll() == 143


@pytest.mark.parametrize(
    ("writable", "mode"),
    [(".", 0o777), (SUBMITIT, 0o775), (f"{SUBMITIT}/{JOB}_0_result.pkl", 0o666)],
    ids=["the trial folder", "submitit's folder", "the result"],
)
def test_a_result_other_users_can_write_is_refused_unread(trial_dir, tmp_path, writable, mode):
    marker = tmp_path / "payload_ran"
    hostile_pickle(result_path(trial_dir), marker)
    (trial_dir / writable).chmod(mode)
    with pytest.raises(UserInputError, match="is writable by other users") as refused:
        finished_trial(trial_dir).poll()
    assert "\n" not in str(refused.value)
    assert not marker.exists()


def test_a_result_in_another_users_folder_is_refused_unread(trial_dir, tmp_path):
    if os.getuid() != 0:
        missing("needs root, to give a folder to another user")
    marker = tmp_path / "payload_ran"
    hostile_pickle(result_path(trial_dir), marker)
    os.chown(trial_dir, 65534, 65534)  # nobody
    with pytest.raises(UserInputError, match="belongs to another user"):
        finished_trial(trial_dir).poll()
    assert not marker.exists()


def test_a_task_leaves_its_result_for_its_user_alone_and_trains_with_the_users_umask(tmp_path):
    """A group-writable umask (002, common on shared clusters) would make submitit's result group-writable, and the
    driver would refuse it; the training's own files keep the umask."""
    checkpoint, result = tmp_path / "last.ckpt", tmp_path / "result.pkl"
    previous = os.umask(0o002)
    try:
        status = run_task([sys.executable, "-c", f"open({str(checkpoint)!r}, 'w')"], str(tmp_path / "trial.log"))
        result.write_bytes(pickle.dumps(("success", status)))  # as submitit does next, in the task's process
    finally:
        os.umask(previous)
    assert status == 0
    assert stat.S_IMODE(checkpoint.stat().st_mode) == 0o664 and stat.S_IMODE(result.stat().st_mode) == 0o644


def test_a_job_id_file_naming_a_result_elsewhere_is_refused(trial_dir, tmp_path):
    """The job id a driver started again reads names the result files: one pointing out of the folder is refused."""
    (tmp_path / "base.yaml").write_text("{}\n")
    placement = SlurmTrials(Options(slurm_nodes=1), {}, tmp_path / "base.yaml")
    (trial_dir / JOB_ID).write_text("../../../elsewhere/1")
    (trial_dir / JOB_ID).chmod(0o600)
    with pytest.raises(UserInputError, match="not a SLURM job id"):
        placement.start(Path("cli.py"), [], trial_dir, port=0)
