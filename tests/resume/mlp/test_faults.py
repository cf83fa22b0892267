"""A stopped run resumes with `--ckpt_path last` to the uninterrupted run's run directory: the same files, metrics
rows, best checkpoint and tracker states, and weights bit for bit (tests/helpers/run_dirs.py).

Real processes and real faults: SIGTERM to one rank, SIGINT to the launching process, SIGKILL to every process of
the run (a lost node), SIGKILL in the middle of a checkpoint write, a truncated file. The staged MLP trains on 64
generated images in batches of 8 with `deterministic: true`: 8 steps an epoch on one process (4 under 2-process
DDP), 2 epochs, `last.ckpt` every 2 steps, the best checkpoint by val/loss and one of the newest epoch (each epoch
deletes the one before), a plateau scheduler that halves the learning rate after every epoch that does not
improve it. Each fault hits a step drawn from the first epoch's last step (before its validation) to the
second's, named in the test's id: drawn from the commit checked out, so each commit hits other steps and a rerun
repeats its draw (set RESUME_TEST_SEED to draw otherwise). A stopped run and its resume are the
same command, as a user reruns it: the fault is a callback that fires once (`once_marker`). A SIGTERM or SIGINT
stops one process at the step it came in; several processes learn of it a step later (`stopped_at`).
"""

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.helpers.faults import fault
from tests.helpers.mlp.resume_runs import (
    RAN_AS,
    RANKS,
    SEED,
    STEPS_PER_EPOCH,
    STRATEGY_ARGS,
    UninterruptedRuns,
    assert_same_run,
    drawn_fault,
    mlp_args,
    run,
    run_ok,
    stopped_at,
    write_settings,
)
from tests.helpers.padded_checkpoint import PADDED_CHECKPOINTS, assert_every_checkpoint_padded
from tests.helpers.ran import assert_ran_as
from tests.helpers.runs import ROOT
from tests.helpers.strategy_runs import run_processes
from trainrig.testing.load import LOAD_MODES, saturated_cpu


@pytest.fixture(scope="module")
def settings(tmp_path_factory, shapes_root) -> Path:
    return write_settings(tmp_path_factory.mktemp("settings"), shapes_root)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, settings) -> dict[str, Path]:
    return UninterruptedRuns(tmp_path_factory, settings)


# In the default run (CI budget): DDP and the pipeline; the others with -m slow.
DEFAULT_RUN = ("ddp", "pipeline")


def stop_cases() -> list:
    """Every strategy with both stops; in the default run `DEFAULT_RUN`'s strategies once each, the stops alternating.

    Each fault hits a step from the first epoch's last step to the last one, and a rank, named in the test's id."""
    cases = []
    for index, strategy in enumerate(STRATEGY_ARGS):
        for stop in ("SIGTERM", "SIGKILL"):
            steps = STEPS_PER_EPOCH[strategy]
            step, rank = drawn_fault(f"{strategy}-{stop}", (steps, 2 * steps), RANKS[strategy])
            slow = stop != ("SIGKILL", "SIGTERM")[index % 2] or strategy not in DEFAULT_RUN
            cases.append(
                pytest.param(
                    strategy,
                    stop,
                    step,
                    rank,
                    marks=[pytest.mark.slow] if slow else [],
                    id=f"{strategy}-{stop}-step{step}-rank{rank}",
                )
            )
    return cases


@pytest.mark.parametrize(("strategy", "stop", "step", "rank"), stop_cases())
def test_stopped_run_resumes_bit_for_bit(uninterrupted, settings, tmp_path, strategy, stop, step, rank):
    context = f"{strategy}, {stop} at step {step} on rank {rank} (RESUME_TEST_SEED={SEED})"
    command = mlp_args(
        settings, tmp_path, strategy, *fault(step, stop, rank, whole_group=stop == "SIGKILL", once=tmp_path / "fired")
    )

    stop_step = stopped_at(step, RANKS[strategy], STEPS_PER_EPOCH[strategy])
    code, output = run(command)
    if stop == "SIGTERM":
        assert code == 143, f"{context}\n{output[-3000:]}"
        assert f"preempted at step {stop_step} " in output, f"{context}\n{output[-3000:]}"
    else:
        assert code == -9, f"{context}\n{output[-3000:]}"

    output = run_ok([*command, "--ckpt_path", "last"])
    # A kill loses the steps since the last checkpoint: every 2 steps and at epoch ends, which come after validation;
    # the one due at `step` comes after the kill.
    expected_step = stop_step if stop == "SIGTERM" else (step - 1) - (step - 1) % 2
    assert f"(step {expected_step})" in output, f"{context}\n{output[-3000:]}"
    assert [path.name for path in (tmp_path / "mlp").iterdir()] == ["version_0"], (
        "a resumed job keeps one run directory"
    )
    assert_same_run(tmp_path, uninterrupted[strategy], context)
    assert_ran_as(tmp_path, **RAN_AS[strategy])


def test_finished_run_extended_by_epochs_ends_as_the_longer_run(uninterrupted, settings, tmp_path):
    """`--ckpt_path last --trainer.max_epochs 2` after a finished 1-epoch run: the 2-epoch run's directory, plus what
    the finished run wrote at its end (its confusion matrix) and the config of the extending command."""
    run_ok(mlp_args(settings, tmp_path, "single", "--trainer.max_epochs", "1"))
    output = run_ok(mlp_args(settings, tmp_path, "single", "--ckpt_path", "last"))
    assert "(step 8)" in output, output[-3000:]
    extra = ("config.resumed-1.yaml", "media/val_confusion_matrix/step000008.csv")
    assert_same_run(tmp_path, uninterrupted["single"], "extended by an epoch", extra)


def test_run_ended_by_max_steps_mid_epoch_extended_ends_as_the_longer_run(uninterrupted, settings, tmp_path):
    """`--trainer.max_steps 5` ends a run in the middle of its first epoch (8 steps), and Lightning ends that epoch
    early; the same run continued with `--trainer.max_steps 16 --ckpt_path last` ends as one run to 16 (the 2-epoch
    run): from the checkpoint after step 5, without the early epoch end's metrics row. Besides: the newest-epoch
    checkpoint the early epoch end saved, and the config of the extending command."""
    run_ok(mlp_args(settings, tmp_path, "single", "--trainer.max_steps", "5"))
    output = run_ok(mlp_args(settings, tmp_path, "single", "--trainer.max_steps", "16", "--ckpt_path", "last"))
    assert "(step 5)" in output, output[-3000:]
    extra = ("config.resumed-1.yaml", "checkpoints/newest-epoch=0.ckpt")
    assert_same_run(tmp_path, uninterrupted["single"], "extended from max_steps 5 to 16", extra)


# Idle with -m slow (CI budget): the saturated machine is the harder case of the same restart.
@pytest.mark.parametrize("load", [pytest.param("idle", marks=pytest.mark.slow), "saturated"])
def test_torchrun_restarts_a_killed_worker_and_the_job_ends_with_the_uninterrupted_weights(
    uninterrupted, settings, tmp_path, load
):
    """`torchrun --max-restarts 1`: rank 1 is killed (-9) mid-epoch, torchrun restarts both workers, which resume.
    `saturated`: with every core kept busy (trainrig/testing/load.py), where the restarted workers take several times
    as long to start and meet: no clock of the agent's or the rendezvous' ends the restart (the CI's one recovery
    under load; the other launchers' run with -m slow). Every checkpoint is of a real model's size (over 100 MB,
    padded), and each the run leaves holds all of it."""
    uninterrupted_run = uninterrupted["ddp"]  # made before the load starts
    kill = fault(6, "SIGKILL", rank=1, once=tmp_path / "killed")
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    padded_run = mlp_args(settings, tmp_path, "ddp", PADDED_CHECKPOINTS)
    command = [*torchrun, "--max-restarts", "1", str(ROOT / "cli.py"), "fit", *padded_run]
    with saturated_cpu(LOAD_MODES[load]):
        result = subprocess.run(
            [*command, *kill, "--ckpt_path", "last"],
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"{load}\n{output[-4000:]}"
    assert (tmp_path / "killed").exists(), "the kill happened"
    assert "resume: continuing from" in output and "(step 4)" in output, output[-4000:]
    assert_every_checkpoint_padded(tmp_path)
    assert_same_run(tmp_path, uninterrupted_run, f"torchrun restart, {load}")


def test_sigint_to_the_launching_process_stops_every_rank_with_a_checkpoint(settings, tmp_path):
    stop_step = stopped_at(5, RANKS["ddp"], STEPS_PER_EPOCH["ddp"])
    code, output = run(mlp_args(settings, tmp_path, "ddp", *fault(5, "SIGINT", rank=0)))
    assert code == 143, output[-3000:]
    assert f"preempted at step {stop_step} by SIGINT" in output, output[-3000:]
    checkpoint = torch.load(next(tmp_path.rglob("last.ckpt")), map_location="cpu", weights_only=False)
    assert checkpoint["global_step"] == stop_step


def test_sigterm_before_the_first_step_stops_at_it_with_a_checkpoint(settings, tmp_path):
    """Lightning's own handler takes a SIGTERM that comes before the template's are installed; the template takes
    over its flag, which Lightning would read at its step broadcast (skipped while the template handles stops)."""
    code, output = run(mlp_args(settings, tmp_path, "single", *fault(0, "SIGTERM")))
    assert code == 143, output[-3000:]
    assert "preempted at step 1 by SIGTERM" in output, output[-3000:]
    checkpoint = torch.load(next(tmp_path.rglob("last.ckpt")), map_location="cpu", weights_only=True)
    assert checkpoint["global_step"] == 1


def test_checkpoint_of_an_empty_experiment_starts_fresh_and_says_so(settings, tmp_path):
    output = run_ok(mlp_args(settings, tmp_path, "single", "--ckpt_path", "last", "--trainer.max_epochs", "1"))
    assert "resume: no checkpoint of this experiment yet; starting fresh" in output
    assert "no last checkpoint available" not in output


# --- data order with another number of processes -------------------------------------------------------------


def test_resumed_with_another_number_of_processes_no_sample_is_skipped_or_repeated(settings, tmp_path, shapes_root):
    """Stopped under 2-process DDP in the middle of an epoch, resumed in 1 process: each sample once in that epoch."""
    record = tmp_path / "samples"
    recorder = [
        "--trainer.callbacks+=tests.helpers.sample_record.RecordSamples",
        f"--trainer.callbacks.init_args.directory={record}",
    ]
    code, output = run(mlp_args(settings, tmp_path, "ddp", *fault(6, "SIGTERM", rank=1), *recorder))
    assert code == 143, output[-3000:]
    run_ok(mlp_args(settings, tmp_path, "single", "--ckpt_path", "last", *recorder))

    seen_in_second_epoch = [
        line.split()[1]
        for path in record.glob("*.txt")
        for line in path.read_text().splitlines()
        if line.startswith("1 ")
    ]
    assert len(seen_in_second_epoch) == 64, "2 steps x 2 ranks x 8 samples before the stop, 4 steps x 8 after it"
    assert len(set(seen_in_second_epoch)) == 64, "a sample was seen twice in the interrupted epoch"
    assert set(seen_in_second_epoch) == training_images(settings, shapes_root)


def training_images(settings: Path, shapes_root: Path) -> set[str]:
    """Hashes of every image of the training split, as the datamodule serves them."""
    from datamodules.synthetic_shapes import SyntheticShapesDataModule

    data = SyntheticShapesDataModule(
        root=str(shapes_root), images_per_class=16, canvas_size=32, image_size=28, grayscale=True, augment=False
    )
    data.prepare_data()
    data.setup("fit")
    return {hashlib.sha1(image.numpy().tobytes()).hexdigest() for image, _ in data.train_set}


# --- damaged checkpoints -----------------------------------------------------------------------------------------


def test_kill_inside_a_checkpoint_write_leaves_the_previous_last_ckpt_usable(settings, tmp_path):
    """SIGKILL after 100 kB of the second save (step 4) of last.ckpt: the one from step 2 stays, whole."""
    plugin = [
        "--trainer.plugins",
        '{"class_path": "tests.helpers.faults.KilledDuringWrite", "init_args": {"on_save": 2}}',
    ]
    code, output = run(mlp_args(settings, tmp_path, "single", *plugin))
    assert code == -9, output[-3000:]
    checkpoints = tmp_path / "mlp" / "version_0" / "checkpoints"
    assert [path.name for path in checkpoints.glob(".last.ckpt.*.partial")], (
        "the kill should have hit a write in progress"
    )
    assert torch.load(checkpoints / "last.ckpt", map_location="cpu", weights_only=False)["global_step"] == 2

    output = run_ok(mlp_args(settings, tmp_path, "single", "--ckpt_path", "last"))
    assert "(step 2)" in output


def test_truncated_last_ckpt_falls_back_to_the_previous_one(uninterrupted, settings, tmp_path):
    command = mlp_args(settings, tmp_path, "single", *fault(11, "SIGTERM", once=tmp_path / "fired"))
    first = run(command)
    assert first[0] == 143, first[1][-3000:]
    last = tmp_path / "mlp" / "version_0" / "checkpoints" / "last.ckpt"
    last.write_bytes(last.read_bytes()[: last.stat().st_size // 2])

    output = run_ok([*command, "--ckpt_path", "last"])
    fallback = [line for line in output.splitlines() if "falling back" in line]
    assert len(fallback) == 1 and "last.ckpt cannot be read" in fallback[0] and "previous.ckpt" in fallback[0]
    assert "(step 10)" in output
    assert_same_run(tmp_path, uninterrupted["single"], "fallback to previous.ckpt")


def test_no_readable_checkpoint_is_a_one_line_error(settings, tmp_path):
    checkpoints = tmp_path / "mlp" / "version_0" / "checkpoints"
    checkpoints.mkdir(parents=True)
    (checkpoints / "last.ckpt").write_bytes(b"not a checkpoint")
    code, output = run(mlp_args(settings, tmp_path, "single", "--ckpt_path", "last"))
    assert code == 2
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "can be resumed from" in errors[0] and "last.ckpt" in errors[0]
    assert "Traceback" not in output


def test_resume_with_another_model_shape_names_the_mismatched_parameter(settings, tmp_path):
    run_ok(mlp_args(settings, tmp_path, "single", "--trainer.max_epochs", "1"))
    code, output = run(
        mlp_args(settings, tmp_path, "single", "--ckpt_path", "last", "--model.init_args.hidden_sizes", "[48]")
    )
    assert code == 2, output[-3000:]
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "network.blocks.0.1.0.weight is [32, 784] there and [48, 784] here" in errors[0], errors
    assert "Traceback" not in output


# --- nothing outside logs/ ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "setting", [["--trainer.fast_dev_run", "2"], ["--trainer.logger", "false", "--trainer.max_steps", "2"]]
)
def test_runs_write_nothing_outside_logs(settings, tmp_path, shapes_root, setting):
    """Run from an empty working directory (the project root of a user): only logs/ may appear there."""
    project = tmp_path / "project"
    project.mkdir()
    args = ["--config", str(ROOT / "configs" / "mlp.yaml"), "--config", str(settings), *setting]
    code, output = run_processes("fit", args, cwd=project)
    assert code == 0, output[-3000:]
    assert {path.name for path in project.iterdir()} <= {"logs"}  # fast_dev_run writes nothing at all
