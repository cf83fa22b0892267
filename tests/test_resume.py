"""A stopped run resumes with `--ckpt_path last` to the uninterrupted run's run directory: the same files, metrics
rows, best checkpoint and tracker states, and weights bit for bit (tests/helpers/run_dirs.py).

Real processes and real faults: SIGTERM to one rank, SIGINT to the launching process, SIGKILL to every process of
the run (a lost node), SIGKILL in the middle of a checkpoint write, a truncated file. The staged MLP trains on 64
generated images in batches of 8 with `deterministic: true`: 8 steps an epoch on one process (4 under 2-process
DDP), 2 epochs, `last.ckpt` every 2 steps, the best checkpoint by val/loss and one of the newest epoch (each epoch
deletes the one before), a plateau scheduler that halves the learning rate after every epoch that does not
improve it. Each fault hits a step drawn at random from the first epoch's last step (before its validation) to the
second's (printed with every failure; set RESUME_TEST_SEED to repeat a draw). A stopped run and its resume are the
same command, as a user reruns it: the fault is a callback that fires once (`once_marker`).
"""

import hashlib
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers.run_dirs import RunDirectory, assert_same_run_directory
from strategy_runs import run_processes

from conftest import ROOT

SEED = int(os.environ.get("RESUME_TEST_SEED", random.randrange(1_000_000)))
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
RANKS = {"single": 1, "layer_split": 1, "ddp": 2, "pipeline": 2, "pipeline_interleaved": 2, "pipeline_ddp": 4}
SLOW_STRATEGIES = ("pipeline_ddp",)
SETTINGS = """
trainer:
  max_epochs: 2
  deterministic: true
  log_every_n_steps: 1
  num_sanity_val_steps: 0
  enable_progress_bar: false
  enable_model_summary: false
  callbacks:
    - class_path: resume.checkpoint.ResumableCheckpoint
      init_args: {{every_n_train_steps: 2, train_time_interval: null}}
    - class_path: lightning.pytorch.callbacks.ModelCheckpoint
      init_args: {{monitor: val/loss, mode: min, save_top_k: 1, filename: "best-epoch{{epoch:02d}}-step{{step}}"}}
    - class_path: lightning.pytorch.callbacks.ModelCheckpoint  # every epoch supersedes the file before it
      init_args: {{monitor: epoch, mode: max, save_top_k: 1, filename: "newest-{{epoch}}"}}
    - class_path: callbacks.confusion_matrix.ConfusionMatrix
model:
  init_args:
    hidden_sizes: [32]
    scheduler:
      class_path: torch.optim.lr_scheduler.ReduceLROnPlateau
      init_args: {{mode: min, factor: 0.5, patience: 0}}
data:
  init_args:
    root: {shapes_root}
    images_per_class: 16
    canvas_size: 32
    batch_size: 8
    num_workers: 0
"""


@pytest.fixture(scope="module")
def settings(tmp_path_factory, shapes_root) -> Path:
    path = tmp_path_factory.mktemp("settings") / "resume_mlp.yaml"
    path.write_text(SETTINGS.format(shapes_root=shapes_root))
    return path


def mlp_args(settings: Path, log_dir: Path, strategy: str, *extra: str) -> list[str]:
    return [
        "--config",
        str(ROOT / "configs" / "mlp.yaml"),
        "--config",
        str(settings),
        *STRATEGY_ARGS[strategy],
        "--trainer.logger.init_args.save_dir",
        str(log_dir),
        *extra,
    ]


def fault(step: int, signal_name: str, rank: int = 0, whole_group: bool = False, once: Path | None = None) -> list[str]:
    return [
        "--trainer.callbacks+=tests.helpers.faults.SignalAtStep",
        f"--trainer.callbacks.init_args.step={step}",
        f"--trainer.callbacks.init_args.signal_name={signal_name}",
        f"--trainer.callbacks.init_args.rank={rank}",
        f"--trainer.callbacks.init_args.whole_group={whole_group}",
        *([f"--trainer.callbacks.init_args.once_marker={once}"] if once is not None else []),
    ]


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


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, settings) -> dict[str, Path]:
    return UninterruptedRuns(tmp_path_factory, settings)


def stop_cases() -> list:
    """Every strategy with both stops; in the default run each strategy once, the stops alternating (CI budget)."""
    cases = []
    for index, strategy in enumerate(STRATEGY_ARGS):
        for stop in ("SIGTERM", "SIGKILL"):
            slow = strategy in SLOW_STRATEGIES or stop != ("SIGKILL", "SIGTERM")[index % 2]
            cases.append(pytest.param(strategy, stop, marks=pytest.mark.slow) if slow else (strategy, stop))
    return cases


@pytest.mark.parametrize(("strategy", "stop"), stop_cases())
def test_stopped_run_resumes_bit_for_bit(uninterrupted, settings, tmp_path, strategy, stop):
    draw = random.Random(f"{SEED}-{strategy}-{stop}")
    steps = STEPS_PER_EPOCH[strategy]
    step = draw.randint(steps, 2 * steps)  # from the first epoch's last step to the last one
    rank = draw.randrange(RANKS[strategy])
    context = f"{strategy}, {stop} at step {step} on rank {rank} (RESUME_TEST_SEED={SEED})"
    command = mlp_args(
        settings, tmp_path, strategy, *fault(step, stop, rank, whole_group=stop == "SIGKILL", once=tmp_path / "fired")
    )

    code, output = run(command)
    if stop == "SIGTERM":
        assert code == 143, f"{context}\n{output[-3000:]}"
        assert f"preempted at step {step}" in output, context
    else:
        assert code == -9, f"{context}\n{output[-3000:]}"

    output = run_ok([*command, "--ckpt_path", "last"])
    # A kill loses the steps since the last checkpoint: every 2 steps and at epoch ends, which come after validation;
    # the one due at `step` comes after the kill.
    expected_step = step if stop == "SIGTERM" else (step - 1) - (step - 1) % 2
    assert f"(step {expected_step})" in output, f"{context}\n{output[-3000:]}"
    assert [path.name for path in (tmp_path / "mlp").iterdir()] == ["version_0"], (
        "a resumed job keeps one run directory"
    )
    assert_same_run(tmp_path, uninterrupted[strategy], context)


def test_finished_run_extended_by_epochs_ends_as_the_longer_run(uninterrupted, settings, tmp_path):
    """`--ckpt_path last --trainer.max_epochs 2` after a finished 1-epoch run: the 2-epoch run's directory, plus what
    the finished run wrote at its end (its confusion matrix) and the config of the extending command."""
    run_ok(mlp_args(settings, tmp_path, "single", "--trainer.max_epochs", "1"))
    output = run_ok(mlp_args(settings, tmp_path, "single", "--ckpt_path", "last"))
    assert "(step 8)" in output, output[-3000:]
    extra = ("config.resumed-1.yaml", "media/val_confusion_matrix/step000008.csv")
    assert_same_run(tmp_path, uninterrupted["single"], "extended by an epoch", extra)


# cookiecutter: only with dask
DASK = ["--dask.n_workers", "2"]


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGINT to the client"])
def test_dask_run_resumes_bit_for_bit(uninterrupted, settings, tmp_path, stop):
    """A rank's worker process gets SIGTERM, or the client gets SIGINT; the command with `--ckpt_path last` resumes.

    No filesystem is shared: rank 0 sends each checkpoint to the client as it is written.
    """
    draw = random.Random(f"{SEED}-dask-{stop}")
    step, rank = draw.randint(4, 7), draw.randrange(2)
    context = f"dask, {stop} at step {step} on rank {rank} (RESUME_TEST_SEED={SEED})"
    signal_name, to_parent = ("SIGINT", True) if stop == "SIGINT to the client" else (stop, False)
    command = mlp_args(
        settings,
        tmp_path,
        "single",
        *DASK,
        *fault(step, signal_name, rank, once=tmp_path / "fired"),
        f"--trainer.callbacks.init_args.to_parent={to_parent}",
    )
    code, output = run(command)
    assert code == 143, f"{context}\n{output[-3000:]}"
    assert "preempted at step" in output and "--ckpt_path last continues the run" in output, context

    output = run_ok([*command, "--ckpt_path", "last"])
    assert "resume: continuing from" in output, f"{context}\n{output[-3000:]}"
    assert [path.name for path in (tmp_path / "mlp").iterdir()] == ["version_0"], (
        "a resumed job keeps one run directory"
    )
    assert_same_run(tmp_path, uninterrupted["ddp"], context)


@pytest.mark.parametrize("checkpoints", ["sent to the client", "in a shared directory"])
def test_dask_restarts_the_ranks_after_a_killed_worker_and_ends_with_the_uninterrupted_run(
    uninterrupted, settings, tmp_path, checkpoints
):
    """One command: a rank's worker is killed (-9) mid-epoch, the launcher restarts every rank from the checkpoint
    rank 0 sent (or wrote to --dask.checkpoint_dir), and the job ends with the uninterrupted weights and metrics in
    one run directory."""
    draw = random.Random(f"{SEED}-dask-restart-{checkpoints}")
    step, rank = draw.randint(5, 7), draw.randrange(2)
    context = f"dask, checkpoints {checkpoints}, SIGKILL at step {step} on rank {rank} (RESUME_TEST_SEED={SEED})"
    once = f"--trainer.callbacks.init_args.once_marker={tmp_path / 'killed'}"
    shared = ["--dask.checkpoint_dir", str(tmp_path / "shared")] if checkpoints == "in a shared directory" else []
    output = run_ok(mlp_args(settings, tmp_path, "single", *DASK, *shared, *fault(step, "SIGKILL", rank), once))
    if shared:  # the run's checkpoints in its own folder of the shared directory, the rest on the client
        shared_checkpoints = tmp_path / "shared" / "mlp" / "version_0" / "checkpoints"
        assert (shared_checkpoints / "last.ckpt").is_file() and not list((tmp_path / "mlp").rglob("*.ckpt"))
        shutil.copytree(shared_checkpoints, tmp_path / "mlp" / "version_0" / "checkpoints")  # one run directory
    resumed_at = (step - 1) - (step - 1) % 2  # last.ckpt every 2 steps; the one due at `step` comes after the kill
    (story,) = [line for line in output.splitlines() if "restart 1 of" in line]
    assert f"rank {rank} (Dask worker" in story and "died: was killed by signal 9" in story, f"{context}\n{story}"
    assert story.endswith(f"restart 1 of 1, resuming at step {resumed_at}"), f"{context}\n{story}"
    assert [path.name for path in (tmp_path / "mlp").iterdir()] == ["version_0"], "one job, one run directory"
    assert_same_run(tmp_path, uninterrupted["ddp"], context)


def test_dask_command_run_again_starts_a_new_run_and_ckpt_path_last_continues_the_newest(
    uninterrupted, settings, tmp_path
):
    """One meaning of a run on every launcher, also with --dask.checkpoint_dir: no run takes over another's
    checkpoints, and `--ckpt_path last` finds the newest run's in the shared directory."""
    shared = tmp_path / "shared"
    command = mlp_args(settings, tmp_path, "single", *DASK, "--dask.checkpoint_dir", str(shared))
    for _ in range(2):
        output = run_ok([*command, "--trainer.max_epochs", "1"])
        assert "resume:" not in output, output[-3000:]
    assert sorted(path.name for path in (tmp_path / "mlp").iterdir()) == ["version_0", "version_1"]
    for version in ("version_0", "version_1"):
        last = torch.load(shared / "mlp" / version / "checkpoints" / "last.ckpt", weights_only=False)
        assert last["global_step"] == 4, f"{version} trained its own epoch from the start"

    output = run_ok([*command, "--ckpt_path", "last"])  # 2 epochs, as the uninterrupted run
    assert f"continuing from {shared / 'mlp' / 'version_1' / 'checkpoints' / 'last.ckpt'} (step 4)" in output
    resumed, reference = RunDirectory(tmp_path / "mlp" / "version_1"), RunDirectory.only_one_under(uninterrupted["ddp"])
    assert resumed.metrics_rows() == reference.metrics_rows()
    assert "config.resumed-1.yaml" in resumed.files(), "the extending command's config, beside the first"


def test_dask_restarts_exhausted_end_the_job_with_the_last_cause(settings, tmp_path):
    """Killed again after its one restart: the job fails with the cause of the last failure."""
    code, output = run(mlp_args(settings, tmp_path, "single", *DASK, *fault(6, "SIGKILL", rank=1)))
    assert code == 1, output[-3000:]
    assert "restart 1 of 1, resuming at step 4" in output, output[-3000:]
    (error,) = [line for line in output.splitlines() if line.startswith("error:")]
    assert re.fullmatch(
        r"error: the Dask run stopped after 1 restart\(s\): rank 1 \(Dask worker \S+, pid \d+\) died: "
        r"was killed by signal 9",
        error,
    ), error


# cookiecutter: end
def test_torchrun_restarts_a_killed_worker_and_the_job_ends_with_the_uninterrupted_weights(
    uninterrupted, settings, tmp_path
):
    """`torchrun --max-restarts 1`: rank 1 is killed (-9) mid-epoch, torchrun restarts both workers, which resume."""
    kill = [*fault(6, "SIGKILL", rank=1), f"--trainer.callbacks.init_args.once_marker={tmp_path / 'killed'}"]
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    command = [*torchrun, "--max-restarts", "1", str(ROOT / "cli.py"), "fit", *mlp_args(settings, tmp_path, "ddp")]
    result = subprocess.run(
        [*command, *kill, "--ckpt_path", "last"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert (tmp_path / "killed").exists(), "the kill happened"
    assert "resume: continuing from" in output and "(step 4)" in output, output[-4000:]
    assert_same_run(tmp_path, uninterrupted["ddp"], "torchrun restart")


def test_sigint_to_the_launching_process_stops_every_rank_with_a_checkpoint(settings, tmp_path):
    code, output = run(mlp_args(settings, tmp_path, "ddp", *fault(5, "SIGINT", rank=0)))
    assert code == 143, output[-3000:]
    assert "preempted at step 5 by SIGINT" in output
    checkpoint = torch.load(next(tmp_path.rglob("last.ckpt")), map_location="cpu", weights_only=False)
    assert checkpoint["global_step"] == 5


def test_checkpoint_of_an_empty_experiment_starts_fresh_and_says_so(settings, tmp_path):
    output = run_ok(mlp_args(settings, tmp_path, "single", "--ckpt_path", "last", "--trainer.max_epochs", "1"))
    assert "resume: no checkpoint of this experiment yet; starting fresh" in output
    assert "no last checkpoint available" not in output


# --- data order with another number of processes -------------------------------------------------------------


def test_resumed_with_another_number_of_processes_no_sample_is_skipped_or_repeated(settings, tmp_path, shapes_root):
    """Stopped under 2-process DDP in the middle of an epoch, resumed in 1 process: each sample once in that epoch."""
    record = tmp_path / "samples"
    recorder = [
        "--trainer.callbacks+=tests.helpers.sample_record.RecordSamples",
        f"--trainer.callbacks.init_args.directory={record}",
    ]
    code, output = run(mlp_args(settings, tmp_path, "ddp", *fault(6, "SIGTERM", rank=1), *recorder))
    assert code == 143, output[-3000:]
    run_ok(mlp_args(settings, tmp_path, "single", "--ckpt_path", "last", *recorder))

    seen_in_second_epoch = [
        line.split()[1]
        for path in record.glob("*.txt")
        for line in path.read_text().splitlines()
        if line.startswith("1 ")
    ]
    assert len(seen_in_second_epoch) == 64, "2 steps x 2 ranks x 8 samples before the stop, 4 steps x 8 after it"
    assert len(set(seen_in_second_epoch)) == 64, "a sample was seen twice in the interrupted epoch"
    assert set(seen_in_second_epoch) == training_images(settings, shapes_root)


def training_images(settings: Path, shapes_root: Path) -> set[str]:
    """Hashes of every image of the training split, as the datamodule serves them."""
    from datamodules.synthetic_shapes import SyntheticShapesDataModule

    data = SyntheticShapesDataModule(
        root=str(shapes_root), images_per_class=16, canvas_size=32, image_size=28, grayscale=True, augment=False
    )
    data.prepare_data()
    data.setup("fit")
    return {hashlib.sha1(image.numpy().tobytes()).hexdigest() for image, _ in data.train_set}


# --- damaged checkpoints -----------------------------------------------------------------------------------------


def test_kill_inside_a_checkpoint_write_leaves_the_previous_last_ckpt_usable(settings, tmp_path):
    """SIGKILL after 100 kB of the second save (step 4) of last.ckpt: the one from step 2 stays, whole."""
    plugin = [
        "--trainer.plugins",
        '{"class_path": "tests.helpers.faults.KilledDuringWrite", "init_args": {"on_save": 2}}',
    ]
    code, output = run(mlp_args(settings, tmp_path, "single", *plugin))
    assert code == -9, output[-3000:]
    checkpoints = tmp_path / "mlp" / "version_0" / "checkpoints"
    assert [path.name for path in checkpoints.glob(".last.ckpt.*.partial")], (
        "the kill should have hit a write in progress"
    )
    assert torch.load(checkpoints / "last.ckpt", map_location="cpu", weights_only=False)["global_step"] == 2

    output = run_ok(mlp_args(settings, tmp_path, "single", "--ckpt_path", "last"))
    assert "(step 2)" in output


def test_truncated_last_ckpt_falls_back_to_the_previous_one(uninterrupted, settings, tmp_path):
    command = mlp_args(settings, tmp_path, "single", *fault(11, "SIGTERM", once=tmp_path / "fired"))
    first = run(command)
    assert first[0] == 143, first[1][-3000:]
    last = tmp_path / "mlp" / "version_0" / "checkpoints" / "last.ckpt"
    last.write_bytes(last.read_bytes()[: last.stat().st_size // 2])

    output = run_ok([*command, "--ckpt_path", "last"])
    fallback = [line for line in output.splitlines() if "falling back" in line]
    assert len(fallback) == 1 and "last.ckpt cannot be read" in fallback[0] and "previous.ckpt" in fallback[0]
    assert "(step 10)" in output
    assert_same_run(tmp_path, uninterrupted["single"], "fallback to previous.ckpt")


def test_no_readable_checkpoint_is_a_one_line_error(settings, tmp_path):
    checkpoints = tmp_path / "mlp" / "version_0" / "checkpoints"
    checkpoints.mkdir(parents=True)
    (checkpoints / "last.ckpt").write_bytes(b"not a checkpoint")
    code, output = run(mlp_args(settings, tmp_path, "single", "--ckpt_path", "last"))
    assert code == 2
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "can be resumed from" in errors[0] and "last.ckpt" in errors[0]
    assert "Traceback" not in output


def test_resume_with_another_model_shape_names_the_mismatched_parameter(settings, tmp_path):
    run_ok(mlp_args(settings, tmp_path, "single", "--trainer.max_epochs", "1"))
    code, output = run(
        mlp_args(settings, tmp_path, "single", "--ckpt_path", "last", "--model.init_args.hidden_sizes", "[48]")
    )
    assert code == 2, output[-3000:]
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "network.blocks.0.1.0.weight is [32, 784] there and [48, 784] here" in errors[0], errors
    assert "Traceback" not in output


# --- nothing outside logs/ ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "setting", [["--trainer.fast_dev_run", "2"], ["--trainer.logger", "false", "--trainer.max_steps", "2"]]
)
def test_runs_write_nothing_outside_logs(settings, tmp_path, shapes_root, setting):
    """Run from an empty working directory (the project root of a user): only logs/ may appear there."""
    project = tmp_path / "project"
    project.mkdir()
    args = ["--config", str(ROOT / "configs" / "mlp.yaml"), "--config", str(settings), *setting]
    code, output = run_processes("fit", args, cwd=project)
    assert code == 0, output[-3000:]
    assert {path.name for path in project.iterdir()} <= {"logs"}  # fast_dev_run writes nothing at all
