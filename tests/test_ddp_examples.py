"""`--trainer.strategy ddp --trainer.devices 2` on CPU (gloo): every example trains, only rank 0 writes."""
# cookiecutter: only with mlp
# The staged MLP's DDP run against one device, and resuming a DDP checkpoint, are in test_strategies.py.
# cookiecutter: end

# cookiecutter: only with lstm
import torch
from lightning.pytorch.trainer.connectors.data_connector import _get_distributed_sampler
from lightning.pytorch.trainer.states import RunningStage
from lightning.pytorch.utilities.data import _update_dataloader
from strategy_runs import checkpoint_path, run_ok

from conftest import ROOT, read_metrics, small_run_args
from datamodules.pet_names import CharWindows, PetNamesDataModule

# cookiecutter: end

DDP = ("--trainer.strategy", "ddp", "--trainer.devices", "2")


# cookiecutter: only with lstm
def test_pet_name_batches_shard_under_lightnings_distributed_sampler():
    """Lightning swaps the sampler of the datamodule's loader; whole-batch indexing must still give each rank its own windows."""
    positions = torch.arange(1003)
    datamodule = PetNamesDataModule(batch_size=64)
    loader = datamodule._loader(CharWindows(positions[:, None], positions[:, None]), shuffle=True)
    per_rank = []
    for rank in range(2):
        sampler = _get_distributed_sampler(
            loader, shuffle=True, overfit_batches=0, mode=RunningStage.TRAINING, num_replicas=2, rank=rank
        )
        sharded = _update_dataloader(loader, sampler, RunningStage.TRAINING)
        batches = list(sharded)
        assert all(inputs.shape[1] == 1 and inputs.dtype == torch.long for inputs, _ in batches)
        per_rank.append(torch.cat([inputs[:, 0] for inputs, _ in batches]).tolist())
    assert len(per_rank[0]) == len(per_rank[1]) == 502  # 1003 windows, one repeated to even the ranks out
    assert set(per_rank[0]) | set(per_rank[1]) == set(positions.tolist())
    assert len(set(per_rank[0]) & set(per_rank[1])) == 1


# cookiecutter: end


# cookiecutter: only with cnn
def test_cnn_trains_on_two_processes_and_only_rank_zero_writes(tmp_path, shapes_root):
    """Metric reduction itself is compared with one device in test_strategies.py (same ClassificationModule)."""
    run_ok("fit", small_run_args("cnn.yaml", tmp_path, shapes_root, *DDP))
    assert [path.parent.name for path in tmp_path.rglob("metrics.csv")] == ["version_0"]
    assert [row["val/acc"] for row in read_metrics(tmp_path) if row.get("val/acc")]
    assert sorted(path.name for path in tmp_path.rglob("*.ckpt")) == ["best-epoch00-step3.ckpt", "last.ckpt"]


# cookiecutter: end


# cookiecutter: only with lstm
def test_lstm_trains_and_generates_names_on_two_processes(tmp_path):
    run_ok("fit", small_run_args("lstm.yaml", tmp_path / "fit", None, *DDP))
    rows = read_metrics(tmp_path / "fit")
    assert [row["val/loss"] for row in rows if row.get("val/loss")]
    run_ok(
        "predict",
        [
            "--config",
            str(ROOT / "configs" / "lstm.yaml"),
            "--trainer.logger.init_args.save_dir",
            str(tmp_path / "predict"),
            "--trainer.enable_progress_bar",
            "false",
            "--data.init_args.num_names_to_generate",
            "40",
            "--model.init_args.exclude_training_names",
            "false",
            "--ckpt_path",
            str(checkpoint_path(tmp_path / "fit", "last.ckpt")),
            *DDP,
        ],
    )
    (names_file,) = (tmp_path / "predict").rglob("generated_names.txt")
    assert len(names_file.read_text().splitlines()) == 40  # 20 per rank, gathered and written once


# cookiecutter: end
