"""Where layer_split puts each stage and sends each stage's input, read from a real run
(tests/strategies/mlp/placement.py).

On CPU the two devices are `cpu:0` and `cpu:1`: both are the CPU, but a move asks for its index, so the run's
requests show which stage went where and that each stage's input was sent to that stage's device; a split that never
moves a tensor fails. On a GPU the stages sit on `cuda:0` and the CPU, and the tensors themselves say where they are.
"""

from pathlib import Path

from tests.helpers.run_if import run_if
from tests.helpers.runs import small_run_args
from tests.helpers.strategy_runs import run_ok
from tests.strategies.mlp.placement import placement_of


def placed_run(tmp_path: Path, shapes_root: Path, devices: str, *extra: str) -> tuple[list[dict], list]:
    records = tmp_path / "placement"
    run_ok(
        "fit",
        small_run_args(
            "mlp.yaml",
            tmp_path,
            shapes_root,
            *("--trainer.strategy", "layer_split", "--trainer.strategy.init_args.devices", devices),
            *("--trainer.max_epochs", "1", "--trainer.limit_train_batches", "1", "--trainer.limit_val_batches", "0"),
            "--trainer.callbacks+=tests.strategies.mlp.placement.StagePlacement",
            f"--trainer.callbacks.init_args.directory={records}",
            *extra,
        ),
    )
    return placement_of(records)


def test_layer_split_sends_each_stage_and_its_input_to_the_stage_device(tmp_path, shapes_root):
    stages, moves = placed_run(tmp_path, shapes_root, "[cpu:0, cpu:1]")
    assert len(stages) == 2
    for index, stage in enumerate(stages):
        device = f"cpu:{index}"
        moved_there = [shape for shape, asked in moves if asked == device]
        for shape, _ in stage["parameters"]:
            assert shape in moved_there, f"a parameter {shape} of stage {index} was never sent to {device}"
        assert stage["inputs"], f"stage {index} never ran"
        for shape, _ in stage["inputs"]:
            assert shape in moved_there, f"stage {index}'s input {shape} was never sent to {device}"
    first_parameters = {tuple(shape) for shape, _ in stages[0]["parameters"]}
    assert not [shape for shape, asked in moves if tuple(shape) in first_parameters and asked == "cpu:1"], (
        "stage 0's parameters went to the last device"
    )


@run_if(min_cuda_devices=1)
def test_layer_split_on_a_gpu_and_the_cpu_keeps_each_stage_and_its_input_there(tmp_path, shapes_root):
    # The trainer runs where the last stage and the loss are: on the CPU (layer_split refuses anything else).
    stages, _ = placed_run(tmp_path, shapes_root, "[cuda:0, cpu]", "--trainer.accelerator", "cpu")
    for stage, device in zip(stages, ("cuda:0", "cpu")):
        assert {placed for _, placed in stage["parameters"]} == {device}
        assert {placed for _, placed in stage["inputs"]} == {device}
