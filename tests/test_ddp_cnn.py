"""`--trainer.strategy ddp --trainer.devices 2` on CPU (gloo): the CNN trains, only rank 0 writes."""

from tests.helpers.runs import read_metrics, small_run_args
from tests.helpers.strategy_runs import run_ok

DDP = ("--trainer.strategy", "ddp", "--trainer.devices", "2")


def test_cnn_trains_on_two_processes_and_only_rank_zero_writes(tmp_path, shapes_root):
    """Metric reduction itself is compared with one device in test_strategies.py (same ClassificationModule)."""
    run_ok("fit", small_run_args("cnn.yaml", tmp_path, shapes_root, *DDP))
    assert [path.parent.name for path in tmp_path.rglob("metrics.csv")] == ["version_0"]
    assert [row["val/acc"] for row in read_metrics(tmp_path) if row.get("val/acc")]
    assert sorted(path.name for path in tmp_path.rglob("*.ckpt")) == ["best-epoch00-step3.ckpt", "last.ckpt"]
