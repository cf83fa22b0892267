"""Each example, as configured (loader workers, augmentation, its own data order), resumes bit for bit after SIGTERM.

The tests of strategies, launchers and faults in tests/resume/ run one small model; this covers every
example's own data pipeline on one device: 2 epochs of 3 steps, stopped by SIGTERM after step 4, in the middle of
epoch 2, and resumed to the uninterrupted run's whole run directory (tests/helpers/run_dirs.py). The project's last
example is in the smoke set, so a generated project's CI proves the resume it promises.
"""

import pytest

from tests.helpers.faults import fault
from tests.helpers.gpu import BF16, ONE_GPU
from tests.helpers.ran import assert_ran_as
from tests.helpers.run_dirs import RunDirectory, assert_same_run_directory
from tests.helpers.run_if import run_if
from tests.helpers.runs import EXAMPLE_CONFIGS, small_run_args
from tests.helpers.strategy_runs import run_processes

PREEMPTED = 143


def fit(config: str, log_dir, shapes_root, *extra: str) -> int:
    args = small_run_args(config, log_dir, shapes_root, "--trainer.max_epochs", "2", "--trainer.deterministic", "true")
    code, output = run_processes("fit", [*args, "--trainer.num_sanity_val_steps", "0", *extra])
    assert code in (0, PREEMPTED), output[-3000:]
    return code


@pytest.mark.parametrize(
    "config",
    [
        pytest.param(config, marks=[pytest.mark.smoke] if config == EXAMPLE_CONFIGS[-1] else [pytest.mark.slow])
        for config in EXAMPLE_CONFIGS  # the others with -m slow: CI budget
    ],
)
def test_example_resumes_mid_epoch_to_the_uninterrupted_run_directory(config, tmp_path, shapes_root):
    assert fit(config, tmp_path / "uninterrupted", shapes_root) == 0
    stop = fault(4, "SIGTERM", once=tmp_path / "stopped-once")  # the same command resumes, as a user reruns it
    assert fit(config, tmp_path / "stopped", shapes_root, *stop) == PREEMPTED
    assert fit(config, tmp_path / "stopped", shapes_root, *stop, "--ckpt_path", "last") == 0
    resumed, uninterrupted = (RunDirectory.only_one_under(tmp_path / run) for run in ("stopped", "uninterrupted"))
    assert_same_run_directory(resumed, uninterrupted, f"{config} stopped at step 4")


@run_if(min_cuda_devices=1)
@pytest.mark.parametrize("config", EXAMPLE_CONFIGS)
def test_example_resumes_mid_epoch_on_a_gpu_to_the_uninterrupted_run_directory(config, tmp_path, shapes_root):
    """The same on CUDA in bf16. `--trainer.deterministic true` is all it needs: Lightning then turns on
    `torch.use_deterministic_algorithms` (deterministic cuDNN convolutions and cuBLAS, CUBLAS_WORKSPACE_CONFIG
    set before cuBLAS starts) and turns cuDNN's benchmark off, so that the resumed steps pick the same kernels."""
    on_gpu = (*ONE_GPU, *BF16)
    assert fit(config, tmp_path / "uninterrupted", shapes_root, *on_gpu) == 0
    stop = fault(4, "SIGTERM", once=tmp_path / "stopped-once")
    assert fit(config, tmp_path / "stopped", shapes_root, *on_gpu, *stop) == PREEMPTED
    assert fit(config, tmp_path / "stopped", shapes_root, *on_gpu, *stop, "--ckpt_path", "last") == 0
    assert_ran_as(tmp_path / "stopped", device="cuda:0", precision="bf16-mixed")
    resumed, uninterrupted = (RunDirectory.only_one_under(tmp_path / run) for run in ("stopped", "uninterrupted"))
    assert_same_run_directory(resumed, uninterrupted, f"{config} on a GPU, stopped at step 4")
