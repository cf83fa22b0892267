"""`--trainer.strategy.init_args.compile true` on the CNN on a GPU: inductor builds Triton kernels for the ResNet
there, and the compiled run trains in bf16 on the GPU (compilation under every strategy is tested on CPU, with the
suite's small model)."""

import math

from tests.helpers.gpu import BF16, ONE_GPU
from tests.helpers.ran import assert_ran_as
from tests.helpers.run_if import run_if
from tests.helpers.runs import last_value, read_metrics, small_run_args
from tests.helpers.strategy_runs import run_ok

COMPILED = ("--trainer.strategy", "single_device", "--trainer.strategy.init_args.compile", "true")


@run_if(min_cuda_devices=1)
def test_the_cnn_compiles_to_triton_kernels_on_a_gpu(tmp_path, shapes_root, monkeypatch):
    cache = tmp_path / "inductor"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache))  # this run's own: generated code proves it compiled
    output = run_ok("fit", small_run_args("cnn.yaml", tmp_path / "logs", shapes_root, *COMPILED, *ONE_GPU, *BF16))
    assert "single_device: compiled" in output, output[-3000:]
    assert_ran_as(tmp_path / "logs", compiled=True, device="cuda:0", precision="bf16-mixed")
    kernels = [path for path in cache.rglob("*.py") if "@triton.jit" in path.read_text(errors="ignore")]
    assert kernels, f"inductor wrote no Triton kernel into {cache}:\n{output[-3000:]}"
    assert math.isfinite(last_value(read_metrics(tmp_path / "logs"), "train/loss"))
