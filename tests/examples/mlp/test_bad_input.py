"""The MLP example's mistakes: each gives one clear line naming the problem and exit 2."""

import pytest

from tests.helpers.runs import small_run_args
from tests.helpers.user_errors import assert_out_of_range, failing_run


@pytest.mark.parametrize(
    ("option", "value", "rule"),
    [
        ("--data.init_args.images_per_class", "1", "must be >= 2"),
        ("--model.init_args.hidden_sizes", "[200, 0]", "must be > 0"),
    ],
)
def test_value_out_of_range_names_the_option(option, value, rule, tmp_path, capsys):
    assert_out_of_range(capsys, small_run_args("mlp.yaml", tmp_path), option, value, rule)


def test_more_stages_than_layers(tmp_path, capsys, shapes_root):
    args = small_run_args("mlp.yaml", tmp_path, shapes_root, "--model.init_args.num_stages", "3")
    error = failing_run(capsys, "fit", args)
    assert error.startswith("error: --model.init_args.num_stages 3 is more than the network's 2 layers;")


def test_missing_fashion_mnist_says_how_to_get_it(tmp_path, capsys):
    args = small_run_args("mlp_fashion_mnist.yaml", tmp_path) + ["--data.init_args.root", str(tmp_path)]
    error = failing_run(capsys, "fit", args)
    assert "FashionMNIST not found" in error and "--data.init_args.download true" in error


def test_a_microbatch_count_that_does_not_divide_the_batch_is_refused_before_any_process_starts(
    tmp_path, capsys, shapes_root
):
    """7 micro-batches of a batch of 100 would run as 5 while the start-up line says 7."""
    args = small_run_args(
        "mlp.yaml",
        tmp_path,
        shapes_root,
        *("--model.init_args.num_stages", "2", "--trainer.strategy", "pipeline", "--trainer.devices", "2"),
        *("--trainer.strategy.init_args.microbatches", "7", "--data.init_args.batch_size", "100"),
    )
    error = failing_run(capsys, "fit", args)
    assert error == (
        "error: pipeline microbatches 7 does not divide the batch size 100 (--data.init_args.batch_size); set "
        "--trainer.strategy.init_args.microbatches 5, or a batch size that 7 divides\n"
    )
    assert not any(tmp_path.iterdir())
