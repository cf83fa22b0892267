"""The FashionMNIST config on a tiny data set written in the real IDX file format (the real one cannot be downloaded
here)."""

import struct

import numpy as np

from datamodules.fashion_mnist import FashionMNISTDataModule
from tests.helpers.runs import last_value, read_metrics, run_cli, small_run_args


def write_idx_files(raw_dir, prefix: str, count: int, rng: np.random.Generator) -> None:
    labels = rng.integers(0, 10, size=count, dtype=np.uint8)
    images = rng.integers(0, 256, size=(count, 28, 28), dtype=np.uint8)
    (raw_dir / f"{prefix}-images-idx3-ubyte").write_bytes(struct.pack(">iiii", 2051, count, 28, 28) + images.tobytes())
    (raw_dir / f"{prefix}-labels-idx1-ubyte").write_bytes(struct.pack(">ii", 2049, count) + labels.tobytes())


def test_mlp_trains_on_fashion_mnist_files(tmp_path):
    raw_dir = tmp_path / "data" / "FashionMNIST" / "raw"
    raw_dir.mkdir(parents=True)
    rng = np.random.default_rng(0)
    write_idx_files(raw_dir, "train", 200, rng)
    write_idx_files(raw_dir, "t10k", 50, rng)
    datamodule = FashionMNISTDataModule(root=str(tmp_path / "data"), val_fraction=0.1, num_workers=0)
    datamodule.prepare_data()
    datamodule.setup("fit")
    assert (len(datamodule.train_set), len(datamodule.val_set), len(datamodule.test_set)) == (180, 20, 50)
    images, labels = next(iter(datamodule.train_dataloader()))
    assert images.shape[1:] == (1, 28, 28) and labels.max() < 10

    run_cli(
        "fit",
        small_run_args(
            "mlp_fashion_mnist.yaml",
            tmp_path / "logs",
            None,
            "--data.init_args.root",
            str(tmp_path / "data"),
            "--data.init_args.num_workers",
            "0",
        ),
    )
    assert last_value(read_metrics(tmp_path / "logs"), "val/loss") > 0
