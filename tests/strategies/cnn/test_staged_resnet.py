"""The CNN example's ResNet, split into stages, trains under every pipeline schedule, layer_split and pipeline x data
parallel as one device (or DDP) does over the same micro-batches.

Batch norm normalizes each micro-batch on its own under a pipeline, so the one-device reference is the batch of 32
run as 4 micro-batches of 8 with the mean loss: `batch_size 8` and `accumulate_grad_batches 4` (Lightning divides
each loss by 4 and sums the gradients; the sampler's order does not depend on the batch size). The running
statistics then see the same 4 updates per step. The reference trains one epoch (one SGD step with momentum) on one
device; every other run resumes that checkpoint for 2 more epochs, so each compares 2 steps of gradients (through
the momentum buffers), the parameters, the batch-norm buffers and the losses, and shows a one-device checkpoint
loading under the strategy. Each run's checkpoint then validates on one device with the logged metrics: the layout
is the same both ways. ZBVZeroBubble (4 stages on 2 processes) and layer_split run by default (about 60 s with the
one-device runs); the other schedules, about 30 s each, and pipeline x data parallel against DDP (about 2 min) are
marked slow (`-m slow`).
"""

import re
from pathlib import Path

import pytest
import torch
import torchvision

from lightning_modules.image_classifier import ImageClassifier
from models.staged_resnet import StagedResNet
from tests.helpers.pipeline_runs import skip_unless_this_torch_runs
from tests.helpers.runs import ROOT, run_cli
from tests.helpers.strategy_runs import (
    SCHEDULE_STAGES,
    checkpoint,
    checkpoint_path,
    expect_user_error,
    largest_difference,
    logged,
    optimizer_tensors,
    run_ok,
)

SETTINGS = """
trainer:
  max_epochs: 3
  log_every_n_steps: 1
  num_sanity_val_steps: 0
  enable_progress_bar: false
  enable_model_summary: false
  callbacks:
    - class_path: lightning.pytorch.callbacks.ModelCheckpoint
      init_args: {{save_top_k: 0, save_last: true}}
model:
  init_args:
    optimizer:
      class_path: torch.optim.SGD
      init_args: {{lr: 0.01, momentum: 0.9}}
    scheduler: null
data:
  init_args:
    root: {shapes_root}
    images_per_class: 8
    canvas_size: 32
    image_size: 32
    batch_size: 32
    num_workers: 0
"""
# Looser than the 1e-5 of a network without batch norm: batch norm divides by each micro-batch's standard
# deviation, which enlarges the first step's rounding differences (gradients summed in another order) in the second;
# measured up to 1.04e-5 (LoopedBFS). A micro-batch missed or counted twice moves the momentum buffers by 0.1 or more.
TOLERANCE = 1e-4
# LoopedBFS runs a step's backward passes in reverse micro-batch order (torch's `ScheduleLoopedBFS`), so it sums the
# gradients in another order than one device's accumulation, which no one-device run reproduces; every other schedule
# matches one device bit for bit. Measured for LoopedBFS: a parameter 1.04e-5 off on an earlier CPU; 1.35e-4, with one
# momentum element 1.35e-2 off, on an AVX-512 AMD EPYC (2026-11-29): a rounding difference is enough to move an
# element's gradient by that much (a ReLU's input crossing zero); its logged losses stay within 4e-5. Looser bounds
# for it, below what a micro-batch missed or counted twice does (the momentum buffers 0.1 or more off).
BOUNDS_OF_ITS_OWN = {"LoopedBFS": {"parameters": 1e-3, "optimizer": 5e-2}}
SAME_MICROBATCHES_ON_ONE_DEVICE = ["--data.init_args.batch_size", "8", "--trainer.accumulate_grad_batches", "4"]
RESNET_SCHEDULES = {**SCHEDULE_STAGES, "GPipe": 2}


@pytest.fixture(scope="module")
def settings(tmp_path_factory, shapes_root) -> Path:
    path = tmp_path_factory.mktemp("settings") / "tiny_resnet.yaml"
    path.write_text(SETTINGS.format(shapes_root=shapes_root))
    return path


def args(settings: Path, log_dir: Path, *extra: str) -> list[str]:
    return [
        "--config",
        str(ROOT / "configs" / "cnn.yaml"),
        "--config",
        str(settings),
        "--trainer.logger.init_args.save_dir",
        str(log_dir),
        *extra,
    ]


@pytest.fixture(scope="module")
def one_device(tmp_path_factory, settings) -> dict[str, Path]:
    """An epoch-1 checkpoint to resume from, and the 3-epoch run that continues it on one device."""
    runs = {"epoch 1": tmp_path_factory.mktemp("one-device-1"), "epoch 3": tmp_path_factory.mktemp("one-device-3")}
    run_cli("fit", args(settings, runs["epoch 1"], *SAME_MICROBATCHES_ON_ONE_DEVICE, "--trainer.max_epochs", "1"))
    resume = ["--ckpt_path", str(checkpoint_path(runs["epoch 1"], "last.ckpt"))]
    run_cli("fit", args(settings, runs["epoch 3"], *SAME_MICROBATCHES_ON_ONE_DEVICE, *resume))
    return runs


def by_module_name(state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Keys without the stage that holds each module, so runs grouped into different numbers of stages compare."""
    return {re.sub(r"blocks\.\d+\.", "", key, count=1): value for key, value in state_dict.items()}


def assert_same_training(
    reference_dir: Path, run_dir: Path, epochs: int, parameters: float = TOLERANCE, optimizer: float = TOLERANCE
) -> None:
    """Parameters, batch-norm buffers, optimizer state (the gradients, through momentum) and losses of the last
    `epochs` epochs; losses also relatively, as the validation loss of a few steps' batch norm can be large."""
    reference, run = checkpoint(reference_dir), checkpoint(run_dir)
    assert largest_difference(by_module_name(reference["state_dict"]), by_module_name(run["state_dict"])) < parameters
    assert (
        largest_difference(
            optimizer_tensors(reference["optimizer_states"][0]), optimizer_tensors(run["optimizer_states"][0])
        )
        < optimizer
    )
    assert run["state_dict"]["network.blocks.0.bn1.num_batches_tracked"] == 12  # 4 micro-batches a step, 3 steps
    for key in ("train/epoch_loss", "val/loss", "val/acc"):
        expected = logged(reference_dir, key)[-epochs:]
        assert logged(run_dir, key)[-epochs:] == pytest.approx(expected, rel=TOLERANCE, abs=TOLERANCE), key


@pytest.mark.parametrize(
    "strategy",
    [
        "pipeline ZBVZeroBubble",
        "layer_split",
        *(
            pytest.param(f"pipeline {schedule}", marks=pytest.mark.slow)
            for schedule in RESNET_SCHEDULES
            if schedule != "ZBVZeroBubble"
        ),
    ],
)
def test_strategy_matches_one_device_over_the_same_microbatches(one_device, settings, tmp_path, strategy):
    if strategy == "layer_split":
        extra = ["--trainer.strategy", "layer_split", *SAME_MICROBATCHES_ON_ONE_DEVICE]
    else:
        schedule = strategy.removeprefix("pipeline ")
        skip_unless_this_torch_runs(schedule)
        extra = [
            *("--trainer.strategy", "pipeline", "--trainer.devices", "2"),
            *("--trainer.strategy.init_args.schedule", schedule, "--trainer.strategy.init_args.microbatches", "4"),
            *("--model.init_args.num_stages", str(RESNET_SCHEDULES[schedule])),
        ]
    resume = ["--ckpt_path", str(checkpoint_path(one_device["epoch 1"], "last.ckpt"))]
    # One process: layer_split runs in this one; the pipeline's processes start from a fresh command.
    (run_cli if strategy == "layer_split" else run_ok)("fit", args(settings, tmp_path / "run", *extra, *resume))

    bounds = BOUNDS_OF_ITS_OWN.get(strategy.removeprefix("pipeline "), {})
    assert_same_training(one_device["epoch 3"], tmp_path / "run", epochs=2, **bounds)

    run_cli(
        "validate",
        args(settings, tmp_path / "back", "--ckpt_path", str(checkpoint_path(tmp_path / "run", "last.ckpt"))),
    )
    assert logged(tmp_path / "back", "val/loss") == pytest.approx(
        logged(tmp_path / "run", "val/loss")[-1:], rel=TOLERANCE, abs=TOLERANCE
    )


@pytest.mark.slow
def test_pipeline_with_data_parallel_matches_ddp_over_the_same_microbatches(settings, tmp_path):
    """2 replicas of a 2-stage pipeline on 4 processes, batch 16 each in 4 micro-batches, against DDP on 2 processes
    running each replica's micro-batches of 4 with gradient accumulation: the same shards (both shard the data over
    2), the same batch-norm batches, the first replica's (rank 0's) running statistics in the checkpoint."""
    run_ok(
        "fit",
        args(
            settings,
            tmp_path / "ddp",
            *("--trainer.strategy", "ddp", "--trainer.devices", "2"),
            *("--data.init_args.batch_size", "4", "--trainer.accumulate_grad_batches", "4"),
        ),
    )
    output = run_ok(
        "fit",
        args(
            settings,
            tmp_path / "run",
            *("--trainer.strategy", "pipeline", "--trainer.strategy.init_args.data_parallel", "2"),
            *("--trainer.devices", "4", "--data.init_args.batch_size", "16"),
        ),
    )
    assert "2 stages on 2 processes x 2 data-parallel replicas, GPipe, 4 micro-batches" in output
    assert_same_training(tmp_path / "ddp", tmp_path / "run", epochs=3)


def test_any_grouping_loads_torchvision_weights_and_computes_the_same(tmp_path, monkeypatch):
    """Small images go through the stages; ImageNet weights (here a stand-in in the hub cache) load as before."""
    resnet = torchvision.models.resnet18().eval()
    images = torch.randn(2, 3, 16, 16)
    expected = resnet(images)
    for num_stages in range(1, 7):
        staged = StagedResNet(torchvision.models.resnet18(), num_stages).eval()
        staged.load_state_dict(resnet.state_dict())
        assert len(staged.stages()) == num_stages
        torch.testing.assert_close(staged(images), expected)
    two_stages, four_stages = (StagedResNet(torchvision.models.resnet18(), n) for n in (2, 4))
    four_stages.load_state_dict(two_stages.state_dict())
    assert by_module_name(four_stages.state_dict()).keys() == resnet.state_dict().keys()

    monkeypatch.setattr(torch.hub, "get_dir", lambda: str(tmp_path))
    weights = torchvision.models.ResNet18_Weights.DEFAULT
    (tmp_path / "checkpoints").mkdir()
    torch.save(resnet.state_dict(), tmp_path / "checkpoints" / Path(weights.url).name)
    pretrained = ImageClassifier(5, "resnet18", pretrained=True, num_stages=3).network.eval()
    stem_and_layer1 = torch.nn.Sequential(resnet.conv1, resnet.bn1, resnet.relu, resnet.maxpool, resnet.layer1)
    torch.testing.assert_close(pretrained.stages()[0](images), stem_and_layer1(images))


def test_more_stages_than_resnet_parts_is_a_one_line_error(capsys, settings, tmp_path):
    expect_user_error(
        capsys,
        args(settings, tmp_path, "--model.init_args.num_stages", "7"),
        "--model.init_args.num_stages 7 is more than resnet18's 6 parts (stem, layer1, layer2, layer3, layer4, head)",
    )
