"""`--trainer.strategy ddp --trainer.devices 2` on CPU (gloo), every example against one process with the whole
global batch: the two ranks split each global batch between them (together, the one process's batch), end as
replicas of one another (their gradients were all-reduced), and only rank 0 writes the run. Where the example's
arithmetic allows (`DDP_DIFFERS` in tests/examples/<example>/example.py says why not: batch norm, a per-token mean),
the ranks end where the one process ends.
"""

import pytest

from tests.helpers.examples import ddp_differs
from tests.helpers.gpu import BF16, ONE_GPU
from tests.helpers.ran import assert_ran_as
from tests.helpers.run_if import run_if
from tests.helpers.runs import EXAMPLE_CONFIGS, small_run_args
from tests.helpers.sample_record import samples_by_rank, weights_by_rank
from tests.helpers.strategy_runs import checkpoint, largest_difference, run_ok

PER_RANK_BATCH = 4
DDP = ("--trainer.strategy", "ddp", "--trainer.devices", "2", "--trainer.accelerator", "cpu")
# Adam's first steps divide by the gradients' own size, so float sums in another order move weights by more than SGD.
TOLERANCE = 1e-4


def recorded_run(config: str, log_dir, shapes_root, batch_size: int, *extra: str) -> list[str]:
    return small_run_args(
        config,
        log_dir,
        shapes_root,
        *("--data.init_args.batch_size", str(batch_size), "--trainer.deterministic", "true"),
        "--trainer.callbacks+=tests.helpers.sample_record.RecordSamples",
        f"--trainer.callbacks.init_args.directory={log_dir / 'samples'}",
        *extra,
    )


@pytest.mark.parametrize(
    "config",
    [
        pytest.param(config, marks=[pytest.mark.smoke] if config == EXAMPLE_CONFIGS[-1] else [pytest.mark.slow])
        for config in EXAMPLE_CONFIGS  # the others with -m slow: CI budget
    ],
)
def test_two_ddp_ranks_train_what_one_process_trains_on_the_whole_batch(config, tmp_path, shapes_root):
    one, two = tmp_path / "one", tmp_path / "two"
    run_ok("fit", recorded_run(config, one, shapes_root, 2 * PER_RANK_BATCH))
    run_ok("fit", recorded_run(config, two, shapes_root, PER_RANK_BATCH, *DDP))

    (whole,) = samples_by_rank(one / "samples").values()
    halves = samples_by_rank(two / "samples")
    assert sorted(halves) == [0, 1]
    for step in range(len(whole) // (2 * PER_RANK_BATCH)):
        batch = slice(step * 2 * PER_RANK_BATCH, (step + 1) * 2 * PER_RANK_BATCH)
        half = slice(step * PER_RANK_BATCH, (step + 1) * PER_RANK_BATCH)
        # As multisets: a data set may hold equal inputs (two names share a window), so no hash names one sample.
        assert sorted(halves[0][half] + halves[1][half]) == sorted(whole[batch]), f"step {step}: not the global batch"
    ranks = weights_by_rank(two / "samples")
    assert len(ranks) == 2 and ranks[0] == ranks[1], "the ranks ended with different weights: no all-reduce"

    assert [path.parent.name for path in two.rglob("metrics.csv")] == ["version_0"], "only rank 0 writes the run"
    if ddp_differs(config) is None:
        assert largest_difference(checkpoint(one)["state_dict"], checkpoint(two)["state_dict"]) < TOLERANCE


@run_if(min_cuda_devices=1)
def test_ddp_on_one_gpu_meets_on_nccl(tmp_path, shapes_root):
    ddp = ("--trainer.strategy", "ddp", *ONE_GPU, *BF16)
    run_ok("fit", small_run_args(EXAMPLE_CONFIGS[-1], tmp_path, shapes_root, *ddp))
    assert_ran_as(tmp_path, strategy="DDPStrategy", processes=1, device="cuda:0", backend="nccl")
