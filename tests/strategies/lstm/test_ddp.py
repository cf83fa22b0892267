"""`--trainer.strategy ddp --trainer.devices 2` on CPU (gloo): the LSTM's batches shard by rank, it trains and
generates names, only rank 0 writes."""

from pathlib import Path
from types import SimpleNamespace

import torch
from torch.utils.data import DistributedSampler

from datamodules.pet_names import CharWindows, PetNamesDataModule
from tests.helpers.runs import ROOT, read_metrics, small_run_args
from tests.helpers.strategy_runs import checkpoint_path, run_ok

DDP = ("--trainer.strategy", "ddp", "--trainer.devices", "2")


def test_pet_name_training_batches_shard_by_rank_without_lightnings_sampler():
    """The resumable loader places each rank's share itself; being a DistributedSampler, Lightning keeps it."""
    positions = torch.arange(1003)
    per_rank = []
    for rank in range(2):
        datamodule = PetNamesDataModule(batch_size=64)
        placement = {"num_replicas": 2, "rank": rank}
        datamodule.trainer = SimpleNamespace(strategy=SimpleNamespace(distributed_sampler_kwargs=placement))
        loader = datamodule.loader(CharWindows(positions[:, None], positions[:, None]), shuffle=True)
        assert isinstance(loader.sampler, DistributedSampler)  # so Lightning's _requires_distributed_sampler is False
        batches = list(loader)
        assert all(inputs.shape[1] == 1 and inputs.dtype == torch.long for inputs, _ in batches)
        per_rank.append(torch.cat([inputs[:, 0] for inputs, _ in batches]).tolist())
    assert len(per_rank[0]) == len(per_rank[1]) == 502  # 1003 windows, one repeated to even the ranks out
    assert set(per_rank[0]) | set(per_rank[1]) == set(positions.tolist())
    assert len(set(per_rank[0]) & set(per_rank[1])) == 1


def predicted_names(checkpoint: Path, log_dir: Path, *options: str) -> list[str]:
    run_ok(
        "predict",
        [
            "--config",
            str(ROOT / "configs" / "lstm.yaml"),
            "--trainer.logger.init_args.save_dir",
            str(log_dir),
            "--trainer.enable_progress_bar",
            "false",
            "--data.init_args.num_names_to_generate",
            "41",
            "--model.init_args.exclude_training_names",
            "false",
            "--ckpt_path",
            str(checkpoint),
            *options,
        ],
    )
    (names_file,) = log_dir.rglob("generated_names.txt")
    return names_file.read_text().splitlines()


def test_lstm_trains_and_generates_names_on_two_processes(tmp_path):
    """Each name drawn from its own seed: two processes write, once and in order, the names one process writes,
    not each rank's draws from a shared seed (half the names, twice)."""
    run_ok("fit", small_run_args("lstm.yaml", tmp_path / "fit", None, *DDP))
    rows = read_metrics(tmp_path / "fit")
    assert [row["val/loss"] for row in rows if row.get("val/loss")]
    checkpoint = checkpoint_path(tmp_path / "fit", "last.ckpt")
    on_two = predicted_names(checkpoint, tmp_path / "two", *DDP)
    assert len(on_two) == 41  # 21 and 20 per rank (the sampler repeats one item to even them out), written once
    assert on_two == predicted_names(checkpoint, tmp_path / "one", "--trainer.devices", "1")
    assert len(set(on_two)) > 30, "names drawn alike on both ranks would repeat every one"
