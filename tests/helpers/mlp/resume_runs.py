"""The resume tests' shared run: the staged MLP, small and deterministic, its strategies, faults and comparisons
(see tests/resume/mlp/test_faults.py)."""

import os
import random
import subprocess
from pathlib import Path

from tests.helpers.mlp import tiny_mlp
from tests.helpers.run_dirs import RunDirectory, assert_same_run_directory
from tests.helpers.runs import ROOT
from tests.helpers.strategy_runs import run_processes


def fault_seed() -> int:
    """RESUME_TEST_SEED (when set and not empty), or else one drawn from the commit checked out: each commit's CI
    hits other steps than the one before, and rerunning a commit repeats its draw (a checkout without git history
    draws with 0)."""
    if os.environ.get("RESUME_TEST_SEED"):
        return int(os.environ["RESUME_TEST_SEED"])
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return int(head.stdout[:8], 16) % 1_000_000 if head.returncode == 0 else 0


SEED = fault_seed()


def drawn_fault(case: str, steps: tuple[int, int], ranks: int) -> tuple[int, int]:
    """The step (from `steps`, both ends included) and the rank a fault of `case` hits, drawn from SEED: a test
    parametrized with them names them in its id, so every run shows what it hit."""
    draw = random.Random(f"{SEED}-{case}")
    return draw.randint(*steps), draw.randrange(ranks)


STEPS_PER_EPOCH = {"single": 8, "layer_split": 8, "pipeline": 8, "pipeline_interleaved": 8, "pipeline_ddp": 4, "ddp": 4}
STRATEGY_ARGS = {
    "single": [],
    "layer_split": ["--config", str(ROOT / "configs/strategies/layer_split.yaml")],
    "ddp": ["--trainer.strategy", "ddp", "--trainer.devices", "2"],
    "pipeline": ["--config", str(ROOT / "configs/strategies/pipeline.yaml")],
    # Two stages per process (0 and 2 on rank 0, 1 and 3 on rank 1), interleaved micro-batches.
    "pipeline_interleaved": [
        *("--config", str(ROOT / "configs/strategies/pipeline.yaml")),
        *("--trainer.strategy.init_args.schedule", "Interleaved1F1B"),
        *("--model.init_args.hidden_sizes", "[32, 32, 32]", "--model.init_args.num_stages", "4"),
    ],
    # 2 replicas of the 2-stage pipeline on 4 processes (slow: 4 processes a run).
    "pipeline_ddp": [
        *("--config", str(ROOT / "configs/strategies/pipeline.yaml")),
        *("--trainer.strategy.init_args.data_parallel", "2", "--trainer.devices", "4"),
    ],
}
# What each strategy's run records of itself (tests/helpers/ran.py).
RAN_AS = {
    "single": {"strategy": "SingleDeviceStrategy", "processes": 1},
    "layer_split": {"strategy": "LayerSplitStrategy", "processes": 1},
    "ddp": {"strategy": "DDPStrategy", "processes": 2},
    "pipeline": {"strategy": "PipelineStrategy", "processes": 2, "schedule": "GPipe", "stages": 2},
    "pipeline_interleaved": {
        "strategy": "PipelineStrategy",
        "processes": 2,
        "schedule": "Interleaved1F1B",
        "stages": 4,
    },
    "pipeline_ddp": {"strategy": "PipelineStrategy", "processes": 4, "stages": 2, "data_parallel": 2},
}
RANKS = {strategy: ran_as["processes"] for strategy, ran_as in RAN_AS.items()}
# Checkpoints every 2 steps, the best and the newest epoch's (each save supersedes the one before), and a callback
# with state of its own: all of what a resumed run must restore.
CALLBACKS = [
    {
        "class_path": "trainrig.resume.checkpoint.ResumableCheckpoint",
        "init_args": {"every_n_train_steps": 2, "train_time_interval": None},
    },
    {
        "class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
        "init_args": {
            "monitor": "val/loss",
            "mode": "min",
            "save_top_k": 1,
            "filename": "best-epoch{epoch:02d}-step{step}",
        },
    },
    {
        "class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
        "init_args": {"monitor": "epoch", "mode": "max", "save_top_k": 1, "filename": "newest-{epoch}"},
    },
    {"class_path": "callbacks.confusion_matrix.ConfusionMatrix"},
]
PLATEAU = {
    "class_path": "torch.optim.lr_scheduler.ReduceLROnPlateau",
    "init_args": {"mode": "min", "factor": 0.5, "patience": 0},
}


def stopped_at(step: int, processes: int, steps_per_epoch: int) -> int:
    """The step at which a run stops, every rank saving `last.ckpt`, when a stop request reaches a rank at `step`.

    Several processes exchange their requests in the background, to read them a step later
    (trainrig/resume/preemption.py), but settle them at an epoch's last step, whose stop then comes after validation
    and the epoch's end; one process stops at the step the request came in."""
    if processes == 1 or step % steps_per_epoch == 0:
        return step
    return step + 1


def write_settings(directory: Path, shapes_root: Path) -> Path:
    """The tiny MLP (tests/helpers/mlp/tiny_mlp.py), deterministic, with its own optimizer (Adam) and a scheduler."""
    return tiny_mlp.write_settings(
        directory / "resume_mlp.yaml",
        shapes_root,
        epochs=2,
        batch_size=8,
        images_per_class=16,
        model={"hidden_sizes": [32], "scheduler": PLATEAU},
        callbacks=CALLBACKS,
        deterministic=True,
    )


def mlp_args(settings: Path, log_dir: Path, strategy: str, *extra: str) -> list[str]:
    return tiny_mlp.mlp_args(settings, log_dir, *STRATEGY_ARGS[strategy], *extra)


def run(args: list[str]) -> tuple[int, str]:
    return run_processes("fit", args)


def run_ok(args: list[str]) -> str:
    code, output = run(args)
    assert code == 0, output[-4000:]
    return output


def assert_same_run(resumed: Path, uninterrupted: Path, context: str, extra_files: tuple[str, ...] = ()) -> None:
    assert_same_run_directory(
        RunDirectory.only_one_under(resumed), RunDirectory.only_one_under(uninterrupted), context, extra_files
    )


class UninterruptedRuns(dict):
    """Each strategy's uninterrupted run, made the first time a test asks for it (slow strategies only then)."""

    def __init__(self, tmp_path_factory, settings: Path):
        super().__init__()
        self.tmp_path_factory, self.settings = tmp_path_factory, settings

    def __missing__(self, strategy: str) -> Path:
        self[strategy] = self.tmp_path_factory.mktemp(f"uninterrupted-{strategy}")
        run_ok(mlp_args(self.settings, self[strategy], strategy))
        return self[strategy]
