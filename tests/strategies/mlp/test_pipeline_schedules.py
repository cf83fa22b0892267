"""Every pipeline schedule trains the staged MLP as one device does; bad schedule options are one-line errors.

Same setup and tolerance as tests/strategies/mlp/test_ddp_layer_split_pipeline.py (32 images, one batch an epoch, SGD
with momentum), here over 2 epochs: two optimizer steps, so the second step's momentum carries the first gradient and
the parameters both.
The schedules with several stages per process run a 4-stage MLP on 2 processes (stage i on process i mod 2, or
ZBVZeroBubble's V: stages 0 and 3 on process 0); 1F1B runs the 2-stage one. One 2-process run per schedule,
compared with one single-device run of the same model; so are 2 data-parallel replicas of the 2-stage pipeline
(4 processes, 16 images each). Every schedule runs by default: about 10 s each.
"""

from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from lightning.pytorch import Trainer
from torch.utils.data import DataLoader, TensorDataset

from lightning_modules.mlp_classifier import MLPClassifier
from tests.helpers.mlp.tiny_mlp import SGD, mlp_args, write_settings
from tests.helpers.pipeline_runs import skip_unless_this_torch_runs
from tests.helpers.ran import assert_ran_as
from tests.helpers.runs import run_cli
from tests.helpers.strategy_runs import (
    SCHEDULE_STAGES,
    TOLERANCE,
    checkpoint,
    expect_user_error,
    largest_difference,
    logged,
    optimizer_tensors,
    run_ok,
)
from trainrig.strategies.pipeline import PipelineStrategy

MODEL = {2: ["--model.init_args.hidden_sizes", "[32]"], 4: ["--model.init_args.hidden_sizes", "[32, 32, 32]"]}


@pytest.fixture(scope="module")
def settings(tmp_path_factory, shapes_root) -> Path:
    path = tmp_path_factory.mktemp("settings") / "schedules.yaml"
    return write_settings(path, shapes_root, epochs=2, model={"optimizer": SGD})


def args(settings: Path, log_dir: Path, num_stages: int, *extra: str) -> list[str]:
    return mlp_args(settings, log_dir, *MODEL[num_stages], "--model.init_args.num_stages", str(num_stages), *extra)


@pytest.fixture(scope="module")
def single_device(tmp_path_factory, settings) -> dict[int, Path]:
    runs = {}
    for num_stages in sorted(set(SCHEDULE_STAGES.values())):
        runs[num_stages] = tmp_path_factory.mktemp(f"single-{num_stages}")
        run_cli("fit", args(settings, runs[num_stages], num_stages))
    return runs


@pytest.mark.parametrize("schedule", SCHEDULE_STAGES)
def test_schedule_matches_single_device(single_device, settings, tmp_path, schedule):
    skip_unless_this_torch_runs(schedule)
    num_stages = SCHEDULE_STAGES[schedule]
    output = run_ok(
        "fit",
        args(
            settings,
            tmp_path,
            num_stages,
            "--trainer.strategy",
            "pipeline",
            "--trainer.strategy.init_args.schedule",
            schedule,
            "--trainer.strategy.init_args.microbatches",
            "4",
            "--trainer.devices",
            "2",
        ),
    )
    assert f"pipeline: {num_stages} stages on 2 processes, {schedule}, 4 micro-batches" in output
    assert_ran_as(tmp_path, strategy="PipelineStrategy", processes=2, schedule=schedule, stages=num_stages)
    single = single_device[num_stages]
    assert largest_difference(checkpoint(single)["state_dict"], checkpoint(tmp_path)["state_dict"]) < TOLERANCE
    assert (
        largest_difference(
            optimizer_tensors(checkpoint(single)["optimizer_states"][0]),
            optimizer_tensors(checkpoint(tmp_path)["optimizer_states"][0]),
        )
        < TOLERANCE
    )
    for key in ("train/loss", "val/loss", "val/acc"):
        assert logged(tmp_path, key) == pytest.approx(logged(single, key), abs=TOLERANCE), key
    assert len(logged(tmp_path, "train/loss")) == 2


@pytest.mark.slow  # CI budget: 32 s
def test_pipeline_with_data_parallel_matches_single_device(single_device, settings, tmp_path):
    """2 replicas of a 2-stage pipeline on 4 processes, 16 images each: the single device's batch of 32."""
    output = run_ok(
        "fit",
        args(
            settings,
            tmp_path,
            2,
            *("--trainer.strategy", "pipeline", "--trainer.strategy.init_args.data_parallel", "2"),
            *("--trainer.devices", "4", "--data.init_args.batch_size", "16"),
        ),
    )
    assert "2 stages on 2 processes x 2 data-parallel replicas" in output
    assert_ran_as(tmp_path, strategy="PipelineStrategy", processes=4, stages=2, data_parallel=2)
    single = single_device[2]
    assert list(checkpoint(tmp_path)["state_dict"]) == list(checkpoint(single)["state_dict"])
    assert largest_difference(checkpoint(single)["state_dict"], checkpoint(tmp_path)["state_dict"]) < TOLERANCE
    assert (
        largest_difference(
            optimizer_tensors(checkpoint(single)["optimizer_states"][0]),
            optimizer_tensors(checkpoint(tmp_path)["optimizer_states"][0]),
        )
        < TOLERANCE
    )
    for key in ("val/loss", "val/acc"):
        assert logged(tmp_path, key) == pytest.approx(logged(single, key), abs=TOLERANCE), key


@pytest.mark.parametrize(
    ("schedule", "num_stages", "microbatches", "message"),
    [
        ("ZBVZeroBubble", 2, 4, "ZBVZeroBubble runs exactly two stages per process, but the model has 2 stages"),
        ("LoopedBFS", 3, 4, "LoopedBFS runs the same number of stages on every process, but the model has 3 stages"),
        ("GPipe", 4, 4, "GPipe runs one stage per process, but the model has 4 stages and the trainer starts 2"),
        ("Interleaved1F1B", 4, 5, "cannot split a batch into 5 micro-batches on 2 processes (it needs whole rounds"),
        ("1F1B", 2, 1, "cannot split a batch into 1 micro-batches on 2 processes (it needs at least one"),
        ("DualPipeV", 4, 2, "cannot split a batch into 2 micro-batches on 2 processes (it needs at least as many"),
        ("GPipe", 2, 4, "pipeline data_parallel 3 does not divide the trainer's 2 process(es) into equal pipelines"),
    ],
)
def test_schedule_conditions_are_one_line_errors(
    capsys, settings, tmp_path, schedule, num_stages, microbatches, message
):
    model = MODEL.get(num_stages, ["--model.init_args.hidden_sizes", "[32, 32]"])
    expect_user_error(
        capsys,
        [
            *args(settings, tmp_path, 2, "--trainer.devices", "2"),
            *model,
            "--model.init_args.num_stages",
            str(num_stages),
            "--trainer.strategy",
            "pipeline",
            "--trainer.strategy.init_args.schedule",
            schedule,
            "--trainer.strategy.init_args.microbatches",
            str(microbatches),
            *(["--trainer.strategy.init_args.data_parallel", "3"] if "data_parallel" in message else []),
        ],
        message,
    )


@pytest.mark.parametrize("schedule", ["DualPipeV", "ZBVZeroBubble"])
def test_v_schedules_on_gloo_say_which_torch_they_need(capsys, monkeypatch, settings, tmp_path, schedule):
    """Torch 2.11 (the GPU machine's) fails them after the rendezvous with gloo's "Pair is not connected"."""
    monkeypatch.setattr(torch, "__version__", "2.11.0+cu130")
    expect_user_error(
        capsys,
        [
            *args(settings, tmp_path, 4, "--trainer.devices", "2"),
            *("--trainer.strategy", "pipeline", "--trainer.strategy.init_args.schedule", schedule),
        ],
        f"pipeline schedule {schedule} on gloo needs torch 2.12 or newer (this is 2.11.0)",
    )
    assert not any(tmp_path.iterdir())


def test_checkpoint_before_the_first_step_resumes_with_the_first_step(tmp_path):
    """torch's optimizer-state helper would give a fresh Adam a zero step of its own, which Adam counts."""
    data = DataLoader(TensorDataset(torch.randn(16, 4), torch.randint(3, (16,))), batch_size=8)
    model = MLPClassifier(3, input_size=4, hidden_sizes=(8,), num_stages=1, optimizer=torch.optim.Adam)

    def trainer(steps: int) -> Trainer:
        return Trainer(
            accelerator="cpu",
            devices=1,
            strategy=PipelineStrategy(),
            max_steps=steps,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            limit_val_batches=0,
        )

    try:
        before_training = trainer(0)
        before_training.fit(model, data)
        before_training.save_checkpoint(tmp_path / "step0.ckpt")
        assert torch.load(tmp_path / "step0.ckpt", weights_only=False)["optimizer_states"][0]["state"] == {}
        one_step = trainer(1)
        one_step.fit(model, data, ckpt_path=tmp_path / "step0.ckpt")
        assert {float(state["step"]) for state in one_step.optimizers[0].state.values()} == {1.0}
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
