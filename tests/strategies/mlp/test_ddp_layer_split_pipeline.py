"""DDP, layer_split and pipeline train the staged MLP exactly as one device does, save and resume.

Every run uses the same data and seed: 32 training images, which is one global batch, so each
epoch is one optimizer step over the same samples whatever the sampler's order or the number of
processes (DDP: 2 x 16, others: 1 x 32). Three epochs give three SGD-with-momentum steps; an
epoch-0 checkpoint gives a mid-run point to resume from. Multi-process runs start `python cli.py`
in a fresh process (Lightning relaunches that command for rank 1); one-process runs go in-process.

Tolerance: parameters and losses must agree to 1e-5 absolute. The strategies differ only in the
order float32 sums are taken (gradients summed over micro-batches or ranks instead of over the
batch, all-reduce), and reordering a float32 sum of n terms changes it by about n * 1.2e-7 of its
magnitude; measured differences here are at most 3e-8 in parameters and optimizer state and
2e-7 in losses. A real mistake moves them by about what one step moves them, 1e-3 to 2e-2 here:
e.g. a gradient counted twice, a shard seen by both ranks or a micro-batch missed. SGD rather than Adam, because Adam's
first steps divide a gradient by its own
magnitude, which turns a 1e-9 rounding difference in a near-zero gradient into a full step.
"""

from pathlib import Path

import pytest

from tests.helpers.mlp.tiny_mlp import SGD, mlp_args, write_settings
from tests.helpers.ran import assert_ran_as
from tests.helpers.run_if import run_if
from tests.helpers.runs import ROOT, run_cli
from tests.helpers.strategy_runs import (
    TOLERANCE,
    checkpoint,
    checkpoint_path,
    expect_user_error,
    largest_difference,
    logged,
    optimizer_tensors,
    run_ok,
    run_processes,
)

EPOCHS = 3
RAN_AS = {
    "single": "SingleDeviceStrategy",
    "layer_split": "LayerSplitStrategy",
    "ddp": "DDPStrategy",
    "pipeline": "PipelineStrategy",
}

# Every epoch's checkpoint, for the mid-run points the resume tests start from.
EVERY_EPOCH = {
    "class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
    "init_args": {"save_top_k": -1, "save_last": True, "filename": "epoch{epoch}", "auto_insert_metric_name": False},
}


@pytest.fixture(scope="module")
def settings(tmp_path_factory, shapes_root) -> Path:
    path = tmp_path_factory.mktemp("settings") / "tiny_mlp.yaml"
    return write_settings(
        path, shapes_root, epochs=EPOCHS, model={"hidden_sizes": [32], "optimizer": SGD}, callbacks=[EVERY_EPOCH]
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory, settings) -> dict[str, Path]:
    """One uninterrupted run per strategy, shared by the comparisons below."""
    base = tmp_path_factory.mktemp("runs")
    logs = {name: base / name for name in ("single", "layer_split", "ddp", "pipeline")}
    run_cli("fit", mlp_args(settings, logs["single"]))
    run_cli(
        "fit", mlp_args(settings, logs["layer_split"], "--config", str(ROOT / "configs/strategies/layer_split.yaml"))
    )
    run_ok(
        "fit",
        mlp_args(
            settings,
            logs["ddp"],
            "--trainer.strategy",
            "ddp",
            "--trainer.devices",
            "2",
            "--data.init_args.batch_size",
            "16",
        ),
    )
    output = run_ok(
        "fit",
        mlp_args(
            settings,
            logs["pipeline"],
            "--trainer.strategy",
            "pipeline",
            "--trainer.strategy.init_args.microbatches",
            "8",
            "--trainer.devices",
            "2",
        ),
    )
    assert "GPipe, 8 micro-batches per batch" in output, "the short name's option did not reach the strategy"
    for name, strategy in RAN_AS.items():
        assert_ran_as(logs[name], strategy=strategy)
    return logs


@pytest.mark.parametrize("strategy", ["layer_split", "ddp", "pipeline"])
def test_strategy_matches_single_device(runs, strategy):
    single, other = runs["single"], runs[strategy]
    assert largest_difference(checkpoint(single)["state_dict"], checkpoint(other)["state_dict"]) < TOLERANCE
    assert (
        largest_difference(
            optimizer_tensors(checkpoint(single)["optimizer_states"][0]),
            optimizer_tensors(checkpoint(other)["optimizer_states"][0]),
        )
        < TOLERANCE
    )
    for key in ("val/loss", "val/acc", "val/confidence"):
        assert logged(other, key) == pytest.approx(logged(single, key), abs=TOLERANCE), key
    assert len(logged(single, "val/loss")) == EPOCHS
    if strategy != "ddp":  # a DDP rank logs the loss of its own half of the batch
        assert logged(other, "train/loss") == pytest.approx(logged(single, "train/loss"), abs=TOLERANCE)


def test_pipeline_checkpoint_holds_every_stage_like_a_single_device_one(runs):
    single, pipeline = checkpoint(runs["single"]), checkpoint(runs["pipeline"])
    assert list(pipeline["state_dict"]) == list(single["state_dict"])
    assert (
        pipeline["optimizer_states"][0]["param_groups"][0]["params"]
        == single["optimizer_states"][0]["param_groups"][0]["params"]
    )


def test_multi_process_runs_write_one_log_and_one_set_of_checkpoints(runs):
    for strategy in ("ddp", "pipeline"):
        assert [path.parent.name for path in runs[strategy].rglob("metrics.csv")] == ["version_0"]
        assert sorted(path.name for path in runs[strategy].rglob("*.ckpt")) == [
            f"epoch{epoch}.ckpt" for epoch in range(EPOCHS)
        ] + ["last.ckpt"]


def test_pipeline_resumes_with_another_schedule_to_the_uninterrupted_result(runs, settings, tmp_path):
    """GPipe and 1F1B run the same arithmetic, so resuming under 1F1B must land on the GPipe run's parameters."""
    resumed = tmp_path / "resumed"
    run_ok(
        "fit",
        mlp_args(
            settings,
            resumed,
            "--config",
            str(ROOT / "configs/strategies/pipeline.yaml"),
            "--trainer.strategy.init_args.schedule",
            "1F1B",
            "--ckpt_path",
            str(checkpoint_path(runs["pipeline"], "epoch0.ckpt")),
        ),
    )
    assert largest_difference(checkpoint(resumed)["state_dict"], checkpoint(runs["pipeline"])["state_dict"]) < TOLERANCE
    assert logged(resumed, "val/loss") == pytest.approx(logged(runs["pipeline"], "val/loss")[1:], abs=TOLERANCE)


def test_ddp_checkpoint_resumes_in_one_process(runs, settings, tmp_path):
    """Two processes of 16 and one process of 32 see the same global batch, so the result is the same."""
    resumed = tmp_path / "resumed"
    run_cli("fit", mlp_args(settings, resumed, "--ckpt_path", str(checkpoint_path(runs["ddp"], "epoch0.ckpt"))))
    assert largest_difference(checkpoint(resumed)["state_dict"], checkpoint(runs["ddp"])["state_dict"]) < TOLERANCE


def test_ddp_resumes_on_the_same_number_of_processes(runs, settings, tmp_path):
    resumed = tmp_path / "resumed"
    run_ok(
        "fit",
        mlp_args(
            settings,
            resumed,
            "--trainer.strategy",
            "ddp",
            "--trainer.devices",
            "2",
            "--data.init_args.batch_size",
            "16",
            "--ckpt_path",
            str(checkpoint_path(runs["ddp"], "epoch0.ckpt")),
        ),
    )
    assert largest_difference(checkpoint(resumed)["state_dict"], checkpoint(runs["ddp"])["state_dict"]) < TOLERANCE


def test_layer_split_resumes_to_the_uninterrupted_result(runs, settings, tmp_path):
    resumed = tmp_path / "resumed"
    run_cli(
        "fit",
        mlp_args(
            settings,
            resumed,
            "--config",
            str(ROOT / "configs/strategies/layer_split.yaml"),
            "--ckpt_path",
            str(checkpoint_path(runs["layer_split"], "epoch0.ckpt")),
        ),
    )
    assert (
        largest_difference(checkpoint(resumed)["state_dict"], checkpoint(runs["layer_split"])["state_dict"]) < TOLERANCE
    )
    assert (
        largest_difference(
            optimizer_tensors(checkpoint(resumed)["optimizer_states"][0]),
            optimizer_tensors(checkpoint(runs["layer_split"])["optimizer_states"][0]),
        )
        < TOLERANCE
    )


@pytest.mark.slow  # CI budget: 41 s; the pipeline's training and checkpoints are checked in the default run
def test_pipeline_test_metrics_equal_single_device_on_the_same_checkpoint(runs, settings, tmp_path):
    ckpt = str(checkpoint_path(runs["single"], "last.ckpt"))
    run_cli("test", mlp_args(settings, tmp_path / "single", "--ckpt_path", ckpt))
    run_ok(
        "test",
        mlp_args(
            settings,
            tmp_path / "pipeline",
            "--trainer.strategy",
            "pipeline",
            "--trainer.devices",
            "2",
            "--ckpt_path",
            ckpt,
        ),
    )
    for key in ("test/loss", "test/acc", "test/acc_top5", "test/confidence"):
        assert logged(tmp_path / "pipeline", key) == pytest.approx(logged(tmp_path / "single", key), abs=TOLERANCE), key


def test_layer_split_refuses_more_stages_than_devices(capsys, settings, tmp_path):
    args = mlp_args(
        settings,
        tmp_path,
        "--config",
        str(ROOT / "configs/strategies/layer_split.yaml"),
        "--model.init_args.hidden_sizes",
        "[16, 16]",
        "--model.init_args.num_stages",
        "3",
    )
    expect_user_error(capsys, args, "layer_split got 2 device(s) ['cpu', 'cpu'] for a model with 3 stages")


@run_if(max_cuda_devices=1)
def test_layer_split_refuses_a_device_that_does_not_exist(capsys, settings, tmp_path):
    args = mlp_args(
        settings,
        tmp_path,
        "--trainer.strategy",
        "layer_split",
        "--trainer.strategy.init_args.devices",
        "[cpu, cuda:1]",
    )
    expect_user_error(capsys, args, "layer_split device 'cuda:1' does not exist")


def test_pipeline_refuses_more_stages_than_processes(capsys, settings, tmp_path):
    expect_user_error(
        capsys,
        mlp_args(settings, tmp_path, "--trainer.strategy", "pipeline", "--trainer.devices", "1"),
        "the model has 2 stages and the trainer starts 1 process(es)",
    )


def test_pipeline_refuses_an_unknown_schedule(capsys, settings, tmp_path):
    args = mlp_args(
        settings,
        tmp_path,
        "--config",
        str(ROOT / "configs/strategies/pipeline.yaml"),
        "--trainer.strategy.init_args.schedule",
        "zigzag",
    )
    expect_user_error(capsys, args, "pipeline schedule 'zigzag' is unknown")


def test_pipeline_mismatch_fails_once_before_starting_processes(settings, tmp_path):
    code, output = run_processes(
        "fit",
        mlp_args(
            settings,
            tmp_path,
            "--trainer.strategy",
            "pipeline",
            "--trainer.devices",
            "2",
            "--model.init_args.hidden_sizes",
            "[16, 16]",
            "--model.init_args.num_stages",
            "3",
        ),
    )
    assert code == 2
    assert (
        output.count(
            "error: pipeline schedule GPipe runs one stage per process, but the model has 3 stages and the trainer "
            "starts 2 process(es)"
        )
        == 1
    )
    assert "Initializing distributed" not in output
