"""`--trainer.strategy fsdp2` shards the MLP and trains as DDP does (each other example in
tests/strategies/<example>/test_fsdp2.py); its sharded checkpoints resume on any
number of processes and under any strategy, and load for `test`, `predict` and as one consolidated file.

Real processes on gloo. The MLP trains on one global batch of 32 per epoch (16 per process on two), with SGD, so
that every world size takes the same steps over the same samples: results differ only in the order float sums are
taken, within `TOLERANCE` (tests/strategies/mlp/test_ddp_layer_split_pipeline.py explains the figure).
"""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.helpers.faults import fault
from tests.helpers.gpu import ONE_GPU
from tests.helpers.mlp import resume_runs
from tests.helpers.mlp.resume_runs import drawn_fault
from tests.helpers.mlp.tiny_mlp import mlp_args, write_mlp_settings
from tests.helpers.predicted_classes import read_predictions
from tests.helpers.ran import assert_ran_as
from tests.helpers.run_if import run_if
from tests.helpers.runs import ROOT, run_cli
from tests.helpers.sharded_runs import (
    DDP,
    FSDP2,
    SHARDED,
    assert_fsdp2_refuses,
    assert_same_losses,
    shard_files,
    sharded_checkpoint,
)
from tests.helpers.strategy_runs import TOLERANCE, checkpoint, largest_difference, logged, run_ok
from trainrig.resume.sharded import consolidated

EPOCHS = 3


@pytest.fixture(scope="module")
def settings(tmp_path_factory, shapes_root) -> Path:
    return write_mlp_settings(tmp_path_factory.mktemp("settings"), shapes_root, EPOCHS, batch_size=32)


@pytest.fixture(scope="module")
def per_process_settings(tmp_path_factory, shapes_root) -> Path:
    """The same global batch of 32 as 16 per process on two processes."""
    return write_mlp_settings(tmp_path_factory.mktemp("settings"), shapes_root, EPOCHS, batch_size=16)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, settings, per_process_settings) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("runs")
    logs = {name: base / name for name in ("single", "ddp", "fsdp2")}
    run_cli("fit", mlp_args(settings, logs["single"]))
    run_ok("fit", mlp_args(per_process_settings, logs["ddp"], *DDP))
    output = run_ok("fit", mlp_args(per_process_settings, logs["fsdp2"], *FSDP2))
    assert SHARDED.format(units=2, processes=2) in output, output[-3000:]
    return logs


def test_fsdp2_trains_the_mlp_as_ddp_and_one_device_do(runs):
    assert_same_losses(runs["fsdp2"], runs["ddp"])
    assert_same_losses(runs["fsdp2"], runs["ddp"], "val/loss")
    assert_same_losses(runs["fsdp2"], runs["single"], "train/epoch_loss")  # each rank logs its own half's train/loss
    (ddp_last,) = runs["ddp"].rglob("last.ckpt")
    ddp_weights = torch.load(ddp_last, map_location="cpu", weights_only=False)["state_dict"]
    assert largest_difference(consolidated(sharded_checkpoint(runs["fsdp2"]))["state_dict"], ddp_weights) <= TOLERANCE


def test_the_checkpoint_is_a_directory_of_shards_with_the_one_before_kept(runs):
    checkpoints = sharded_checkpoint(runs["fsdp2"]).parent
    assert sorted(path.name for path in checkpoints.iterdir()) == ["last.ckpt", "previous.ckpt"], "no staging left"
    for name in ("last.ckpt", "previous.ckpt"):
        assert shard_files(checkpoints / name) == [".metadata", "__0_0.distcp", "__1_0.distcp", "meta.pt"]
    assert consolidated(checkpoints / "last.ckpt")["global_step"] == EPOCHS
    assert consolidated(checkpoints / "previous.ckpt")["global_step"] == EPOCHS - 1


# Where each epoch of a continued run trains: (strategy arguments, per-process batch settings).
PLACES = {
    "fsdp2 x2": (FSDP2, "per_process_settings"),
    "fsdp2 x1": (("--trainer.strategy", "fsdp2", "--trainer.devices", "1"), "settings"),
    "ddp x2": (DDP, "per_process_settings"),
    "one device": ((), "settings"),
}


@pytest.mark.parametrize(
    "places",
    [
        ("fsdp2 x2", "fsdp2 x1", "fsdp2 x2"),
        pytest.param(("fsdp2 x2", "ddp x2", "fsdp2 x2"), marks=pytest.mark.slow),  # CI budget
        pytest.param(("fsdp2 x2", "one device", "ddp x2"), marks=pytest.mark.slow),
    ],
    ids=" then ".join,
)
def test_a_sharded_run_continues_on_another_world_size_or_strategy_epoch_by_epoch(runs, request, tmp_path, places):
    """One epoch in each place, resumed with `--ckpt_path last`: the uninterrupted fsdp2 run's losses and weights."""
    for epoch, place in enumerate(places, start=1):
        strategy, settings_name = PLACES[place]
        resume = ("--ckpt_path", "last") if epoch > 1 else ()
        args = mlp_args(request.getfixturevalue(settings_name), tmp_path, *strategy, *resume)
        output = run_ok("fit", [*args, "--trainer.max_epochs", str(epoch)])
        assert epoch == 1 or f"(step {epoch - 1})" in output, f"{place}: {output[-3000:]}"
        (last,) = tmp_path.rglob("last.ckpt")
        assert last.is_dir() == place.startswith("fsdp2"), f"{place} wrote {last}"
    assert_same_losses(tmp_path, runs["fsdp2"], "train/epoch_loss")
    assert_same_losses(tmp_path, runs["fsdp2"], "val/loss")
    mine = consolidated(last)["state_dict"] if last.is_dir() else torch.load(last, weights_only=False)["state_dict"]
    assert largest_difference(mine, consolidated(sharded_checkpoint(runs["fsdp2"]))["state_dict"]) <= TOLERANCE


def test_test_and_predict_load_a_sharded_checkpoint_and_its_consolidated_file_alike(
    runs, settings, per_process_settings, tmp_path
):
    last = sharded_checkpoint(runs["fsdp2"])
    single_file = tmp_path / "shared.ckpt"
    result = subprocess.run(
        [sys.executable, "-m", "trainrig.resume.consolidate", str(last), str(single_file)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    plain = torch.load(single_file, weights_only=False)
    assert plain["global_step"] == EPOCHS and plain["state_dict"].keys() == consolidated(last)["state_dict"].keys()
    losses = {}
    for name, path in (("sharded", last), ("file", single_file)):
        run_cli("test", mlp_args(settings, tmp_path / name, "--ckpt_path", str(path)))
        losses[name] = logged(tmp_path / name, "test/loss")
    assert losses["sharded"] == losses["file"] and losses["file"], losses

    writer = "--trainer.callbacks+=callbacks.predicted_classes_writer.PredictedClassesWriter"  # the settings' list
    run_cli("predict", mlp_args(settings, tmp_path / "predict-file", "--ckpt_path", str(single_file), writer))
    (from_file, _) = read_predictions(tmp_path / "predict-file")
    run_cli("predict", mlp_args(settings, tmp_path / "predict-sharded", "--ckpt_path", str(last), writer))
    assert read_predictions(tmp_path / "predict-sharded")[0] == from_file and from_file
    # Sharded over two processes again: each classifies half of the images with its half of every layer gathered.
    sharded = mlp_args(per_process_settings, tmp_path / "predict-fsdp2", "--ckpt_path", str(last), writer, *FSDP2)
    run_ok("predict", sharded)
    sharded_rows = read_predictions(tmp_path / "predict-fsdp2")[0]
    assert [row["class_id"] for row in sharded_rows] == [row["class_id"] for row in from_file]
    assert [float(row["probability"]) for row in sharded_rows] == pytest.approx(
        [float(row["probability"]) for row in from_file], abs=TOLERANCE
    )


def test_consolidate_refuses_what_is_no_sharded_checkpoint_in_one_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "trainrig.resume.consolidate", str(tmp_path), str(tmp_path / "out.ckpt")],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: {tmp_path} is not a sharded checkpoint directory (no meta.pt)"
    assert not (tmp_path / "out.ckpt").exists()


def test_tensor_parallel_splits_the_mlp_and_trains_as_one_device(runs, settings, tmp_path):
    """tensor_parallel 2 on two processes: both see the whole batch, each holds half of every planned layer."""
    output = run_ok("fit", mlp_args(settings, tmp_path, *FSDP2, "--trainer.strategy.init_args.tensor_parallel", "2"))
    assert SHARDED.format(units=2, processes=1) + " x tensor parallel 2" in output, output[-3000:]
    assert_same_losses(tmp_path, runs["single"])
    assert (
        largest_difference(
            consolidated(sharded_checkpoint(tmp_path))["state_dict"],
            torch.load(next(runs["single"].rglob("last.ckpt")), weights_only=False)["state_dict"],
        )
        <= TOLERANCE
    )


@pytest.mark.slow
def test_tensor_parallel_times_fsdp_on_four_processes_trains_as_one_device(runs, per_process_settings, tmp_path):
    """2 data-parallel groups x tensor_parallel 2 (slow: four processes on two cores)."""
    tp = ("--trainer.strategy", "fsdp2", "--trainer.devices", "4", "--trainer.strategy.init_args.tensor_parallel", "2")
    output = run_ok("fit", mlp_args(per_process_settings, tmp_path, *tp))
    assert SHARDED.format(units=2, processes=2) + " x tensor parallel 2" in output, output[-3000:]
    assert_same_losses(tmp_path, runs["single"], "train/epoch_loss")
    assert_same_losses(tmp_path, runs["single"], "val/loss")


def test_options_that_trade_memory_leave_the_results_unchanged(runs, per_process_settings, tmp_path):
    """Parameters kept gathered from forward to backward, activations recomputed: the same numbers exactly."""
    options = ("reshard_after_forward", "false", "activation_checkpointing", "true")
    strategy_options = [
        f"--trainer.strategy.init_args.{name}={value}" for name, value in zip(options[::2], options[1::2])
    ]
    run_ok("fit", mlp_args(per_process_settings, tmp_path, *FSDP2, *strategy_options))
    assert_same_losses(tmp_path, runs["fsdp2"], tolerance=0.0)


def test_bf16_mixed_precision_trains_in_bfloat16_with_float32_shards(per_process_settings, tmp_path):
    run_ok("fit", mlp_args(per_process_settings, tmp_path, *FSDP2, "--trainer.precision", "bf16-mixed"))
    weights = consolidated(sharded_checkpoint(tmp_path))["state_dict"]
    assert {tensor.dtype for tensor in weights.values()} == {torch.float32}, "master weights stay float32"
    assert all(loss == loss for loss in logged(tmp_path, "train/loss"))


@pytest.mark.parametrize(
    ("config", "extra", "message"),
    [
        pytest.param(
            "mlp.yaml",
            ("--trainer.strategy.init_args.tensor_parallel", "2"),
            "fsdp2 tensor_parallel 2 does not divide the 1 processes",
            id="tensor_parallel does not divide",
        ),
        pytest.param(
            "mlp.yaml",
            ("--trainer.strategy.init_args.cpu_offload", "true"),
            "fsdp2 cpu_offload moves GPU state into CPU memory; on --trainer.accelerator cpu",
            id="cpu_offload on cpu",
        ),
        pytest.param(
            "mlp.yaml",
            ("--trainer.precision", "bf16-true"),
            "the fsdp2 strategy trains with --trainer.precision 32-true or bf16-mixed, not bf16-true",
            id="precision",
        ),
        pytest.param(
            "mlp.yaml",
            ("--trainer.strategy.init_args.tensor_parallel", "0"),
            "--trainer.strategy.init_args.tensor_parallel must be > 0, got 0",
            id="tensor_parallel 0",
        ),
    ],
)
def test_an_option_that_cannot_hold_fails_in_one_line_and_writes_nothing(
    capsys, tmp_path, shapes_root, config, extra, message
):
    """Each other example's own refusals are in tests/strategies/<example>/test_fsdp2.py."""
    assert_fsdp2_refuses(capsys, tmp_path, shapes_root, config, extra, message)


@pytest.fixture(scope="module")
def resume_settings(tmp_path_factory, shapes_root) -> Path:
    return resume_runs.write_settings(tmp_path_factory.mktemp("settings"), shapes_root)


@pytest.fixture(scope="module")
def uninterrupted_fsdp2(tmp_path_factory, resume_settings) -> Path:
    """tests/resume/mlp/test_faults.py's run (Adam, a plateau scheduler, best and newest checkpoints) under fsdp2."""
    log_dir = tmp_path_factory.mktemp("uninterrupted-fsdp2")
    resume_runs.run_ok(resume_runs.mlp_args(resume_settings, log_dir, "single", *FSDP2))
    return log_dir


@pytest.mark.parametrize(
    ("stop", "step", "rank"),
    [
        pytest.param(stop, *drawn, id=f"{stop}-step{drawn[0]}-rank{drawn[1]}", marks=marks)
        for stop, marks in (("SIGTERM", []), ("SIGKILL", [pytest.mark.slow]))
        for drawn in [drawn_fault(f"fsdp2-{stop}", (4, 8), 2)]  # from the first epoch's last step to the last
    ],
)
@pytest.mark.slow  # CI budget: 32 s; resumes on other world sizes stay
def test_a_stopped_fsdp2_run_resumes_to_the_uninterrupted_run_directory(
    uninterrupted_fsdp2, resume_settings, tmp_path, stop, step, rank
):
    """As tests/resume/mlp/test_faults.py does for every other strategy: the same files, rows, checkpoints, weights bit
    for bit."""
    context = f"fsdp2, {stop} at step {step} on rank {rank} (RESUME_TEST_SEED={resume_runs.SEED})"
    faulty = fault(step, stop, rank, whole_group=stop == "SIGKILL", once=tmp_path / "fired")
    command = resume_runs.mlp_args(resume_settings, tmp_path, "single", *FSDP2, *faulty)
    code, output = resume_runs.run(command)
    assert code == (143 if stop == "SIGTERM" else -9), f"{context}\n{output[-3000:]}"
    output = resume_runs.run_ok([*command, "--ckpt_path", "last"])
    # 2 processes, 4 steps an epoch
    expected_step = resume_runs.stopped_at(step, 2, 4) if stop == "SIGTERM" else (step - 1) - (step - 1) % 2
    assert f"(step {expected_step})" in output, f"{context}\n{output[-3000:]}"
    resume_runs.assert_same_run(tmp_path, uninterrupted_fsdp2, context)
    assert_ran_as(tmp_path, strategy="FSDP2Strategy", processes=2, data_parallel=2, tensor_parallel=1)
    assert sharded_checkpoint(tmp_path).is_dir()


@pytest.mark.slow  # inductor compiles each unit's forward and backward: minutes on two cores
def test_compile_compiles_each_unit_before_sharding_and_trains_as_without(runs, per_process_settings, tmp_path):
    run_ok("fit", mlp_args(per_process_settings, tmp_path, *FSDP2, "--trainer.strategy.init_args.compile", "true"))
    assert_same_losses(tmp_path, runs["fsdp2"])


@run_if(min_cuda_devices=1)
def test_fsdp2_on_one_gpu_trains_as_that_gpu_alone(settings, tmp_path):
    """fsdp2's units sharded over one process on nccl, against the same run on the same GPU without a strategy (fp32:
    both take the same kernels, so they agree within float rounding)."""
    alone, sharded = tmp_path / "alone", tmp_path / "fsdp2"
    run_ok("fit", mlp_args(settings, alone, *ONE_GPU))
    output = run_ok("fit", mlp_args(settings, sharded, "--trainer.strategy", "fsdp2", *ONE_GPU))
    assert SHARDED.format(units=2, processes=1) in output, output[-3000:]
    whole = consolidated(sharded_checkpoint(sharded))
    assert {key: whole["parallelism"][key] for key in ("device", "backend")} == {"device": "cuda:0", "backend": "nccl"}
    assert_same_losses(sharded, alone, "train/epoch_loss")
    assert largest_difference(whole["state_dict"], checkpoint(alone)["state_dict"]) <= TOLERANCE
