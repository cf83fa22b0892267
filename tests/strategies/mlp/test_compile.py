"""`--trainer.strategy.init_args.compile true` under every strategy: the run compiles with inductor, records that
it compiled, and trains as the uncompiled run does.

Each compiled run is a fresh `python cli.py` process with its own inductor cache directory: generated code in it
proves inductor built the graphs in that run (a shared cache would let a later run reuse an earlier one's). The
results are compared with one uncompiled run on one device, which every strategy matches within float rounding
(tests/strategies/mlp/test_ddp_layer_split_pipeline.py): parameters and validation losses within 1e-5 (measured:
1e-8; inductor fuses the same float32 operations). A compiled run that silently fell back to the uncompiled code would
pass the comparison, which is why each also checks the record and the cache.

Inductor builds C++ kernels for each block's forward and backward in each process: 30 to 80 s a run on two shared
cores, so every compiled run is `slow`.
"""

from pathlib import Path

import pytest

from tests.helpers.ran import assert_ran_as
from tests.helpers.runs import ROOT, run_cli
from tests.helpers.strategy_runs import TOLERANCE, checkpoint, largest_difference, logged, run_ok

SETTINGS = """
trainer:
  max_epochs: 2
  log_every_n_steps: 1
  num_sanity_val_steps: 0
  enable_progress_bar: false
  enable_model_summary: false
model:
  init_args:
    hidden_sizes: [32]
    optimizer:
      class_path: torch.optim.SGD
      init_args: {{lr: 0.1, momentum: 0.9}}
data:
  init_args:
    root: {shapes_root}
    images_per_class: 8
    canvas_size: 32
    batch_size: 32
    num_workers: 0
"""
COMPILE = ("--trainer.strategy.init_args.compile", "true")
TWO_PROCESSES = ("--trainer.devices", "2")
HALF_BATCH = ("--data.init_args.batch_size", "16")  # two data-parallel processes see the same 32 samples per step
# What torch logs when it compiles a graph inside DDP's forward (DDPOptimizer, which splits at DDP's buckets).
DDP_OPTIMIZER_LOG = "torch._dynamo.backends.distributed"
DDP_OPTIMIZER_LINE = "DDPOptimizer used bucket cap"


@pytest.fixture(scope="module")
def settings(tmp_path_factory, shapes_root) -> Path:
    path = tmp_path_factory.mktemp("settings") / "tiny_mlp.yaml"
    path.write_text(SETTINGS.format(shapes_root=shapes_root))
    return path


def mlp_args(settings: Path, log_dir: Path, *extra: str) -> list[str]:
    return [
        *("--config", str(ROOT / "configs" / "mlp.yaml"), "--config", str(settings)),
        *("--trainer.logger.init_args.save_dir", str(log_dir)),
        *extra,
    ]


@pytest.fixture(scope="module")
def uncompiled(tmp_path_factory, settings) -> Path:
    log_dir = tmp_path_factory.mktemp("uncompiled")
    run_cli("fit", mlp_args(settings, log_dir))
    assert_ran_as(log_dir, strategy="SingleDeviceStrategy", compiled=False)
    return log_dir


def run_compiled(settings: Path, tmp_path: Path, monkeypatch, *strategy_args: str) -> tuple[Path, str]:
    """A compiled run in a fresh process, with an inductor cache of its own; its log directory and output."""
    cache = tmp_path / "inductor"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache))
    monkeypatch.setenv("TORCH_LOGS", DDP_OPTIMIZER_LOG)
    log_dir = tmp_path / "logs"
    output = run_ok("fit", mlp_args(settings, log_dir, *strategy_args, *COMPILE))
    built = [path for path in (cache / "fxgraph").rglob("*") if path.is_file()] if (cache / "fxgraph").is_dir() else []
    assert built, f"inductor wrote no compiled graph into {cache}:\n{output[-3000:]}"
    return log_dir, output


def assert_trains_as_uncompiled(log_dir: Path, uncompiled: Path) -> None:
    assert largest_difference(checkpoint(log_dir)["state_dict"], checkpoint(uncompiled)["state_dict"]) < TOLERANCE
    assert logged(log_dir, "val/loss") == pytest.approx(logged(uncompiled, "val/loss"), abs=TOLERANCE)
    assert len(logged(log_dir, "val/loss")) == 2


@pytest.mark.slow
def test_ddp_compiles_each_block_inside_the_ddp_wrapper(settings, uncompiled, tmp_path, monkeypatch):
    """Lightning #18798's case: the blocks are compiled after Lightning wrapped the model in DDP, and their graphs
    are built inside DDP's forward, where DDPOptimizer takes them (its log line proves it did)."""
    ddp = ("--trainer.strategy", "ddp", *TWO_PROCESSES, *HALF_BATCH)
    log_dir, output = run_compiled(settings, tmp_path, monkeypatch, *ddp)
    assert "ddp: compiled 2 module(s) with torch.compile" in output
    assert DDP_OPTIMIZER_LINE in output, output[-3000:]
    assert_ran_as(log_dir, strategy="DDPStrategy", processes=2, compiled=True)
    assert_trains_as_uncompiled(log_dir, uncompiled)


@pytest.mark.slow
def test_single_device_compiles_with_inductor(settings, uncompiled, tmp_path, monkeypatch):
    log_dir, output = run_compiled(settings, tmp_path, monkeypatch, "--trainer.strategy", "single_device")
    assert "single_device: compiled 2 module(s) with torch.compile" in output
    assert DDP_OPTIMIZER_LINE not in output
    assert_ran_as(log_dir, strategy="SingleDeviceStrategy", processes=1, compiled=True)
    assert_trains_as_uncompiled(log_dir, uncompiled)
    assert logged(log_dir, "train/loss") == pytest.approx(logged(uncompiled, "train/loss"), abs=TOLERANCE)


@pytest.mark.slow
def test_layer_split_compiles_each_stage_on_its_device(settings, uncompiled, tmp_path, monkeypatch):
    layer_split = ("--config", str(ROOT / "configs/strategies/layer_split.yaml"))
    log_dir, output = run_compiled(settings, tmp_path, monkeypatch, *layer_split)
    assert "layer_split: compiled 2 module(s) with torch.compile" in output
    assert_ran_as(log_dir, strategy="LayerSplitStrategy", devices=["cpu", "cpu"], compiled=True)
    assert_trains_as_uncompiled(log_dir, uncompiled)
    assert logged(log_dir, "train/loss") == pytest.approx(logged(uncompiled, "train/loss"), abs=TOLERANCE)


@pytest.mark.slow
def test_pipeline_compiles_each_stage_of_each_process(settings, uncompiled, tmp_path, monkeypatch):
    pipeline = ("--trainer.strategy", "pipeline", "--trainer.strategy.init_args.microbatches", "8")
    log_dir, output = run_compiled(settings, tmp_path, monkeypatch, *pipeline, *TWO_PROCESSES)
    assert "pipeline: compiled 1 module(s) with torch.compile" in output  # rank 0's stage
    assert_ran_as(log_dir, strategy="PipelineStrategy", processes=2, stages=2, compiled=True)
    assert_trains_as_uncompiled(log_dir, uncompiled)
    assert logged(log_dir, "train/loss") == pytest.approx(logged(uncompiled, "train/loss"), abs=TOLERANCE)


@pytest.mark.slow
def test_fsdp2_compiles_each_unit_before_sharding(settings, uncompiled, tmp_path, monkeypatch):
    one_file = ("--trainer.strategy.init_args.sharded_checkpoint", "false")  # comparable with one device's
    fsdp2 = ("--trainer.strategy", "fsdp2", *one_file, *TWO_PROCESSES, *HALF_BATCH)
    log_dir, output = run_compiled(settings, tmp_path, monkeypatch, *fsdp2)
    assert "fsdp2: compiled 2 module(s) with torch.compile" in output
    assert DDP_OPTIMIZER_LINE not in output
    assert_ran_as(log_dir, strategy="FSDP2Strategy", processes=2, data_parallel=2, compiled=True)
    assert_trains_as_uncompiled(log_dir, uncompiled)
