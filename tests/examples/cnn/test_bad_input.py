"""The CNN example's mistakes: each gives one clear line naming the problem and exit 2."""

import socket

import pytest
from PIL import Image

from tests.helpers.runs import ROOT, small_run_args
from tests.helpers.user_errors import assert_out_of_range, failing_run


def image_folder_args(tmp_path, root) -> list[str]:
    return small_run_args("cnn.yaml", tmp_path, None) + [
        "--data",
        "datamodules.image_folder.ImageFolderDataModule",
        "--data.init_args.root",
        str(root),
        "--data.init_args.num_workers",
        "0",
        "--data.init_args.image_size",
        "32",
    ]


def write_images(folder, count: int) -> None:
    folder.mkdir(parents=True)
    for index in range(count):
        Image.new("RGB", (8, 8), (index * 20, 0, 0)).save(folder / f"{index}.png")


@pytest.mark.parametrize(
    ("option", "value", "rule"),
    [
        ("--data.init_args.train_fraction", "1.0", "must be > 0 and < 1"),
        ("--data.init_args.image_size", "0", "must be > 0"),
    ],
)
def test_value_out_of_range_names_the_option(option, value, rule, tmp_path, capsys):
    assert_out_of_range(capsys, small_run_args("cnn.yaml", tmp_path), option, value, rule)


def test_missing_image_folder(tmp_path, capsys):
    error = failing_run(capsys, "fit", image_folder_args(tmp_path, tmp_path / "dogs"))
    assert f"image folder {tmp_path / 'dogs'} does not exist" in error


def test_image_folder_without_class_folders(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    error = failing_run(capsys, "fit", image_folder_args(tmp_path, tmp_path / "empty"))
    assert "has no class sub-folders" in error


def test_class_folder_without_images(tmp_path, capsys):
    write_images(tmp_path / "images" / "beagle", 4)
    (tmp_path / "images" / "pug").mkdir()
    error = failing_run(capsys, "fit", image_folder_args(tmp_path, tmp_path / "images"))
    assert "pug" in error and "no valid file" in error.lower()


def test_corrupt_image_names_the_file(tmp_path, capsys):
    for breed in ("beagle", "pug"):
        write_images(tmp_path / "images" / breed, 6)
    (tmp_path / "images" / "pug" / "broken.png").write_bytes(b"not an image at all")
    error = failing_run(
        capsys,
        "fit",
        image_folder_args(tmp_path, tmp_path / "images")
        + ["--trainer.limit_train_batches", "1.0", "--trainer.limit_val_batches", "1.0"],
    )
    assert "cannot read image" in error and "broken.png" in error


def refusing_port() -> int:
    """A local port nothing listens on: bound, then closed, so a connection to it is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_pretrained_weights_offline_fail_fast(tmp_path, capsys, monkeypatch, shapes_root):
    """Offline on any machine: every download goes through a proxy that refuses (urllib, which torch.hub downloads
    with, reads the proxy from the environment)."""
    proxy = f"http://127.0.0.1:{refusing_port()}"
    for name in ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, proxy)
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch-home"))
    error = failing_run(
        capsys, "fit", small_run_args("cnn.yaml", tmp_path, shapes_root) + ["--model.init_args.pretrained", "true"]
    )
    assert error.count("\n") == 1 and error.startswith("error: could not download pretrained weights "), error
    assert "Connection refused" in error, "the download did not go through the refusing proxy"
    assert "pretrained to false" in error


def test_missing_dogs_data_says_what_how_and_which_flag(tmp_path, capsys):
    error = failing_run(capsys, "fit", small_run_args("cnn_dogs.yaml", tmp_path))
    assert "image folder data/dogs/Images does not exist" in error
    assert "images.tar" in error and "--data.init_args.root" in error


@pytest.mark.parametrize("strategy", ["layer_split", "pipeline"])
def test_backbone_without_stages_is_refused(capsys, tmp_path, shapes_root, strategy):
    args = [
        "--config",
        str(ROOT / "configs" / "cnn.yaml"),
        "--model.init_args.backbone",
        "mobilenet_v3_small",
        "--trainer.logger.init_args.save_dir",
        str(tmp_path),
        "--data.init_args.root",
        str(shapes_root),
        "--data.init_args.images_per_class",
        "8",
        "--data.init_args.canvas_size",
        "32",
        "--trainer.strategy",
        strategy,
        "--trainer.devices",
        "1",
    ]
    assert "backbone 'mobilenet_v3_small' has no known split into stages" in failing_run(capsys, "fit", args)


def test_an_image_folder_with_one_class_is_refused_before_the_model_is_built(tmp_path, capsys):
    folder = tmp_path / "images" / "beagle"
    folder.mkdir(parents=True)
    (folder / "0.png").write_bytes(b"")
    args = small_run_args("cnn.yaml", tmp_path / "logs") + [
        "--data",
        "datamodules.image_folder.ImageFolderDataModule",
        "--data.init_args.root",
        str(tmp_path / "images"),
    ]
    error = failing_run(capsys, "fit", args)
    assert error == (
        f"error: image folder: {tmp_path / 'images'} has only 1 class (beagle); a classifier needs at least two: add "
        f"a sub-folder of images per class to {tmp_path / 'images'}\n"
    )
    assert not (tmp_path / "logs").exists()
