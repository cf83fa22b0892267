"""The staged MLP streamed from shards (configs/mlp_streaming.yaml over 80 small generated images, 3 or 4 to a chunk),
shrunk for the tests of streaming and of streaming on each launcher; and the one check that a run streamed.

64 training samples, batches of 8 per process: 8 steps an epoch on one process, 4 on two.
"""

import contextlib
import io
import json
from pathlib import Path

import yaml

from tests.helpers.run_dirs import RunDirectory
from tests.helpers.runs import ROOT
from tests.helpers.sample_record import samples_by_rank
from trainrig.data import shards
from trainrig.data.streaming import loader_positions

__all__ = [
    "STREAMING_DATAMODULE",
    "TRAIN_SAMPLES",
    "assert_each_sample_once",
    "assert_streamed",
    "write_config",
    "write_shards",
]

STREAMING_DATAMODULE = "datamodules.streaming_images.StreamingImagesDataModule"
TRAIN_SAMPLES = 64


def write_config(
    path: Path, shards_folder: Path, source_root: Path, images_per_class: int = 16, checkpoint_every: int | None = None
) -> Path:
    """configs/mlp_streaming.yaml with small shards of small images, 2 epochs, no sanity validation;
    `checkpoint_every`: last.ckpt every that many steps as well (for a kill -9, which leaves no checkpoint of its own).
    """
    config = yaml.safe_load((ROOT / "configs" / "mlp_streaming.yaml").read_text())
    config["trainer"] |= {"max_epochs": 2, "num_sanity_val_steps": 0, "enable_progress_bar": False}
    config["trainer"] |= {"enable_model_summary": False, "log_every_n_steps": 1, "deterministic": True}
    if checkpoint_every is not None:
        (resumable,) = [c for c in config["trainer"]["callbacks"] if c["class_path"].endswith("ResumableCheckpoint")]
        resumable["init_args"] = {"every_n_train_steps": checkpoint_every, "train_time_interval": None}
    config["model"]["init_args"] |= {"hidden_sizes": [32]}
    source = {"root": str(source_root), "images_per_class": images_per_class, "canvas_size": 32}
    config["data"]["init_args"] |= {"shards": str(shards_folder), "batch_size": 8, "window_chunks": 2}
    config["data"]["init_args"]["source"]["init_args"] = source
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def write_shards(config: Path) -> tuple[int, str]:
    """`python -m trainrig.data.shards write` in this process: its exit status and what it printed."""
    printed = io.StringIO()
    with contextlib.redirect_stderr(printed):
        try:
            shards.main(["write", "--config", str(config), "--chunk-bytes", "10000"])
        except SystemExit as exit_info:
            return exit_info.code, printed.getvalue()
    return 0, printed.getvalue()


def assert_streamed(log_dir: Path, shards_folder: Path, configured: str | None = None) -> None:
    """The one run under `log_dir` streamed from the shards at `shards_folder`: its saved config names the streaming
    datamodule and that folder (or `configured`, the path to it the config gives), and its last checkpoint's data
    position counts in those shards (their fingerprint), which only the streaming loader writes."""
    run = RunDirectory.only_one_under(log_dir)
    data = yaml.safe_load((run.path / "config.yaml").read_text())["data"]
    named = (data["class_path"], data["init_args"]["shards"])
    assert named == (STREAMING_DATAMODULE, configured or str(shards_folder)), data
    fingerprint = json.loads((shards_folder / shards.MANIFEST).read_text())["fingerprint"]
    positions = loader_positions(run.checkpoint())
    assert [position.get("shards") for position in positions] == [fingerprint], positions


def assert_each_sample_once(samples: Path, epoch: int, ranks: int | None = None) -> None:
    """In `epoch`, the ranks recorded (tests/helpers/sample_record.py) in `samples` trained each training sample
    exactly once, together; with `ranks`, that many ranks in equal shares."""
    recorded = samples_by_rank(samples)
    shares = {
        rank: [line.split()[1] for line in lines if int(line.split()[0]) == epoch] for rank, lines in recorded.items()
    }
    trained = [sample for share in shares.values() for sample in share]
    assert len(trained) == len(set(trained)) == TRAIN_SAMPLES, (
        f"epoch {epoch}: {len(trained)} samples trained, {len(set(trained))} of {TRAIN_SAMPLES} different"
    )
    if ranks is not None:
        assert {rank: len(share) for rank, share in shares.items()} == dict.fromkeys(
            range(ranks), TRAIN_SAMPLES // ranks
        )
