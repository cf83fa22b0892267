"""The resume test's run under the Dask launcher: a stopped job resumes, a killed worker's job restarts, to the
uninterrupted DDP run's run directory (see tests/resume/mlp/test_faults.py)."""

import re
import shutil
from pathlib import Path

import pytest
import torch

from tests.helpers.faults import fault
from tests.helpers.mlp.resume_runs import (
    SEED,
    UninterruptedRuns,
    assert_same_run,
    drawn_fault,
    mlp_args,
    run,
    run_ok,
    write_settings,
)
from tests.helpers.padded_checkpoint import PADDED_CHECKPOINTS, assert_padded
from tests.helpers.run_dirs import RunDirectory
from trainrig.testing.load import saturated_cpu


@pytest.fixture(scope="module")
def settings(tmp_path_factory, shapes_root) -> Path:
    return write_settings(tmp_path_factory.mktemp("settings"), shapes_root)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, settings) -> dict[str, Path]:
    return UninterruptedRuns(tmp_path_factory, settings)


DASK = ["--dask.n_workers", "2"]


@pytest.mark.parametrize(
    ("stop", "step", "rank"),
    [
        pytest.param(
            stop,
            *drawn,
            id=f"{stop}-step{drawn[0]}-rank{drawn[1]}",
            marks=[pytest.mark.slow] if "SIGINT" in stop else [],
        )  # SIGINT with -m slow: CI budget
        for stop in ["SIGTERM", "SIGINT to the client"]
        for drawn in [drawn_fault(f"dask-{stop}", (4, 7), 2)]
    ],
)
def test_dask_run_resumes_bit_for_bit(uninterrupted, settings, tmp_path, stop, step, rank):
    """A rank's worker process gets SIGTERM, or the client gets SIGINT; the command with `--ckpt_path last` resumes.

    No filesystem is shared: rank 0 sends each checkpoint to the client as it is written, at a real model's size
    (over 100 MB, padded): a transfer that outlived the 300 s a save waits for the client once kept such a checkpoint
    from ever arriving.
    """
    context = f"dask, {stop} at step {step} on rank {rank} (RESUME_TEST_SEED={SEED})"
    signal_name, to_parent = ("SIGINT", True) if stop == "SIGINT to the client" else (stop, False)
    command = mlp_args(
        settings,
        tmp_path,
        "single",
        *DASK,
        PADDED_CHECKPOINTS,
        *fault(step, signal_name, rank, to_parent=to_parent, once=tmp_path / "fired"),
    )
    code, output = run(command)
    assert code == 143, f"{context}\n{output[-3000:]}"
    assert "preempted at step" in output and "--ckpt_path last continues the run" in output, context

    last = RunDirectory.only_one_under(tmp_path).path / "checkpoints" / "last.ckpt"
    assert_padded(last)
    resumed = run_ok([*command, "--ckpt_path", "last"])
    assert "resume: continuing from" in resumed, f"{context}\n{resumed[-3000:]}"
    assert "did not store" not in output + resumed, f"{context}: a checkpoint waited out the client"
    assert_padded(last)
    assert [path.name for path in (tmp_path / "mlp").iterdir()] == ["version_0"], (
        "a resumed job keeps one run directory"
    )
    assert_same_run(tmp_path, uninterrupted["ddp"], context)


@pytest.mark.parametrize(
    ("checkpoints", "step", "rank"),
    [
        pytest.param(
            checkpoints,
            *drawn,
            id=f"{checkpoints}-step{drawn[0]}-rank{drawn[1]}",
            # CI budget: 42 s; the checkpoints sent to the client come back in the default run's SIGTERM test above
            marks=[pytest.mark.slow] if checkpoints == "sent to the client" else [],
        )
        for checkpoints in ["sent to the client", "in a shared directory"]
        for drawn in [drawn_fault(f"dask-restart-{checkpoints}", (5, 7), 2)]
    ],
)
def test_dask_restarts_the_ranks_after_a_killed_worker_and_ends_with_the_uninterrupted_run(
    uninterrupted, settings, tmp_path, monkeypatch, checkpoints, step, rank
):
    """One command: a rank's worker is killed (-9) mid-epoch, the launcher restarts every rank from the checkpoint
    rank 0 sent (or wrote to --dask.checkpoint_dir), and the job ends with the uninterrupted weights and metrics in
    one run directory, leaving no rank's working folder behind (the killed one's included)."""
    context = f"dask, checkpoints {checkpoints}, SIGKILL at step {step} on rank {rank} (RESUME_TEST_SEED={SEED})"
    temporary = tmp_path / "tmp"  # the job's own temporary directory, where its Dask workers keep their folders
    temporary.mkdir()
    monkeypatch.setenv("TMPDIR", str(temporary))
    shared = ["--dask.checkpoint_dir", str(tmp_path / "shared")] if checkpoints == "in a shared directory" else []
    output = run_ok(
        mlp_args(settings, tmp_path, "single", *DASK, *shared, *fault(step, "SIGKILL", rank, once=tmp_path / "killed"))
    )
    if shared:  # the run's checkpoints in its own folder of the shared directory, the rest on the client
        shared_checkpoints = tmp_path / "shared" / "mlp" / "version_0" / "checkpoints"
        assert (shared_checkpoints / "last.ckpt").is_file() and not list((tmp_path / "mlp").rglob("*.ckpt"))
        shutil.copytree(shared_checkpoints, tmp_path / "mlp" / "version_0" / "checkpoints")  # one run directory
    resumed_at = (step - 1) - (step - 1) % 2  # last.ckpt every 2 steps; the one due at `step` comes after the kill
    (story,) = [line for line in output.splitlines() if "restart 1 of" in line]
    assert f"rank {rank} (Dask worker" in story and "died: was killed by signal 9" in story, f"{context}\n{story}"
    assert story.endswith(f"restart 1 of 1, resuming at step {resumed_at}"), f"{context}\n{story}"
    assert [path.name for path in (tmp_path / "mlp").iterdir()] == ["version_0"], "one job, one run directory"
    assert_same_run(tmp_path, uninterrupted["ddp"], context)
    assert not list(temporary.rglob("dask-rank*")), f"{context}: a rank's working folder was left behind"


@pytest.mark.slow  # a few minutes: every process of the run gets a share of the cores, not a core
@pytest.mark.timeout(900)
def test_dask_restart_after_a_killed_worker_on_a_busy_machine_ends_with_the_uninterrupted_run(
    uninterrupted, settings, tmp_path
):
    """As above with every core kept busy (tests/helpers/load.py): the nannies take far longer to start the workers
    again (the killed one's and the one its rank was waiting in), and the restart waits for them instead of giving
    up after a fixed time."""
    step, rank = drawn_fault("dask-restart-busy", (5, 7), 2)
    context = f"dask on a busy machine, SIGKILL at step {step} on rank {rank} (RESUME_TEST_SEED={SEED})"
    uninterrupted_run = uninterrupted["ddp"]  # made before the load starts
    with saturated_cpu():
        code, output = run(
            mlp_args(settings, tmp_path, "single", *DASK, *fault(step, "SIGKILL", rank, once=tmp_path / "killed"))
        )
    assert code == 0, f"{context}\n{output[-4000:]}"
    (story,) = [line for line in output.splitlines() if "restart 1 of" in line]
    assert f"rank {rank} (Dask worker" in story and "died: was killed by signal 9" in story, f"{context}\n{story}"
    assert_same_run(tmp_path, uninterrupted_run, context)


@pytest.mark.slow  # CI budget: 58 s
def test_dask_command_run_again_starts_a_new_run_and_ckpt_path_last_continues_the_newest(
    uninterrupted, settings, tmp_path
):
    """One meaning of a run on every launcher, also with --dask.checkpoint_dir: no run takes over another's
    checkpoints, and `--ckpt_path last` finds the newest run's in the shared directory."""
    shared = tmp_path / "shared"
    command = mlp_args(settings, tmp_path, "single", *DASK, "--dask.checkpoint_dir", str(shared))
    for _ in range(2):
        output = run_ok([*command, "--trainer.max_epochs", "1"])
        assert "resume:" not in output, output[-3000:]
    assert sorted(path.name for path in (tmp_path / "mlp").iterdir()) == ["version_0", "version_1"]
    for version in ("version_0", "version_1"):
        last = torch.load(shared / "mlp" / version / "checkpoints" / "last.ckpt", weights_only=False)
        assert last["global_step"] == 4, f"{version} trained its own epoch from the start"

    output = run_ok([*command, "--ckpt_path", "last"])  # 2 epochs, as the uninterrupted run
    assert f"continuing from {shared / 'mlp' / 'version_1' / 'checkpoints' / 'last.ckpt'} (step 4)" in output
    resumed, reference = RunDirectory(tmp_path / "mlp" / "version_1"), RunDirectory.only_one_under(uninterrupted["ddp"])
    assert resumed.metrics_rows() == reference.metrics_rows()
    assert "config.resumed-1.yaml" in resumed.files(), "the extending command's config, beside the first"


@pytest.mark.slow  # CI budget: 30 s
def test_dask_restarts_exhausted_end_the_job_with_the_last_cause(settings, tmp_path):
    """Killed again after its one restart: the job fails with the cause of the last failure."""
    code, output = run(mlp_args(settings, tmp_path, "single", *DASK, *fault(6, "SIGKILL", rank=1)))
    assert code == 1, output[-3000:]
    assert "restart 1 of 1, resuming at step 4" in output, output[-3000:]
    (error,) = [line for line in output.splitlines() if line.startswith("error:")]
    assert re.fullmatch(
        r"error: the Dask run stopped after 1 restart\(s\): rank 1 \(Dask worker \S+, pid \d+\) died: "
        r"was killed by signal 9",
        error,
    ), error
