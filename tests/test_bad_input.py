"""A user's mistake gives one clear line naming the problem, a non-zero exit, and destroys nothing."""

import os  # cookiecutter: only with lstm
import subprocess  # cookiecutter: only with lstm
import sys  # cookiecutter: only with lstm

import pytest
from PIL import Image  # cookiecutter: only with cnn

from conftest import EXAMPLE_CONFIGS, ROOT, run_cli, small_run_args


def failing_run(capsys, subcommand: str, args: list[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        run_cli(subcommand, args)
    assert exit_info.value.code == 2
    return capsys.readouterr().err


# cookiecutter: only with cnn
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


# cookiecutter: end


@pytest.mark.parametrize("config", EXAMPLE_CONFIGS)
def test_unknown_option_is_short_and_suggests_the_closest(config, tmp_path, capsys):
    error = failing_run(capsys, "fit", small_run_args(config, tmp_path) + ["--trainer.max_epochz", "1"])
    first, second = error.splitlines()  # not the 60 lines of usage
    assert first.startswith("error: unknown option --trainer.max_epochz; did you mean --trainer.max_epochs")
    assert second.startswith("all options: ") and second.endswith(" fit --help")


def test_unknown_key_in_a_config_file_names_the_key(tmp_path, capsys):
    config_file = tmp_path / "mine.yaml"
    config_file.write_text("trainer:\n  max_stepz: 3\n")
    error = failing_run(capsys, "fit", small_run_args(EXAMPLE_CONFIGS[0], tmp_path) + ["--config", str(config_file)])
    assert error.splitlines()[0].startswith("error: unknown config key trainer.max_stepz")
    assert "did you mean --trainer.max_steps" in error and len(error.splitlines()) <= 10


def test_unknown_argument_of_the_data_class_suggests_its_own_arguments(tmp_path, capsys):
    args = small_run_args(EXAMPLE_CONFIGS[0], tmp_path) + ["--data.init_args.batch_sise", "3"]
    error = failing_run(capsys, "fit", args)
    assert "has no argument batch_sise" in error and "did you mean --data.init_args.batch_size?" in error
    assert len(error.splitlines()) <= 10


def test_invalid_trainer_setting_is_one_line(tmp_path, capsys):
    error = failing_run(capsys, "fit", small_run_args(EXAMPLE_CONFIGS[0], tmp_path) + ["--trainer.strategy", "nope"])
    assert error.startswith("error: invalid trainer settings:") and "nope" in error and len(error.splitlines()) == 1


def test_help_still_lists_every_option(capsys):
    with pytest.raises(SystemExit) as exit_info:
        run_cli("fit", ["--help"])
    assert exit_info.value.code == 0
    assert "--trainer.max_steps" in capsys.readouterr().out


@pytest.mark.parametrize("config", EXAMPLE_CONFIGS)
def test_wrong_value_type(config, tmp_path, capsys):
    error = failing_run(capsys, "fit", small_run_args(config, tmp_path) + ["--data.init_args.batch_size", "many"])
    assert error.startswith("error: --data.init_args.batch_size: ") and "many" in error and error.count("\n") == 1


@pytest.mark.smoke
@pytest.mark.parametrize("config", EXAMPLE_CONFIGS)
def test_negative_batch_size(config, tmp_path, capsys):
    error = failing_run(capsys, "fit", small_run_args(config, tmp_path, None, "--data.init_args.batch_size", "-5"))
    assert error == "error: --data.init_args.batch_size must be > 0, got -5\n"


@pytest.mark.parametrize("config", EXAMPLE_CONFIGS)
def test_negative_num_workers(config, tmp_path, capsys):
    error = failing_run(capsys, "fit", small_run_args(config, tmp_path, None, "--data.init_args.num_workers", "-2"))
    assert error == "error: --data.init_args.num_workers must be >= 0, got -2\n"


def test_negative_learning_rate(tmp_path, capsys, shapes_root):
    args = small_run_args(EXAMPLE_CONFIGS[0], tmp_path, shapes_root, "--model.init_args.optimizer.init_args.lr", "-3")
    error = failing_run(capsys, "fit", args)
    assert error == "error: --model.init_args.optimizer.init_args.lr must be >= 0, got -3.0\n"


def test_predict_from_a_missing_checkpoint(tmp_path, capsys):
    missing = tmp_path / "nope.ckpt"
    error = failing_run(capsys, "predict", small_run_args(EXAMPLE_CONFIGS[0], tmp_path) + ["--ckpt_path", str(missing)])
    assert error == f"error: checkpoint {missing} does not exist; set --ckpt_path to a saved .ckpt file\n"


# Each example's other constrained options, one value out of range each.
OUT_OF_RANGE = [
    ("cnn.yaml", "--data.init_args.train_fraction", "1.0", "must be > 0 and < 1"),  # cookiecutter: only with cnn
    ("cnn.yaml", "--data.init_args.image_size", "0", "must be > 0"),  # cookiecutter: only with cnn
    ("lstm.yaml", "--data.init_args.context_length", "0", "must be > 0"),  # cookiecutter: only with lstm
    ("lstm.yaml", "--data.init_args.val_fraction", "1", "must be >= 0 and < 1"),  # cookiecutter: only with lstm
    ("lstm.yaml", "--model.init_args.temperature", "0", "must be > 0"),  # cookiecutter: only with lstm
    ("lstm.yaml", "--model.init_args.dropout", "1.5", "must be >= 0 and <= 1"),  # cookiecutter: only with lstm
    ("mlp.yaml", "--data.init_args.images_per_class", "1", "must be >= 2"),  # cookiecutter: only with mlp
    ("mlp.yaml", "--model.init_args.hidden_sizes", "[200, 0]", "must be > 0"),  # cookiecutter: only with mlp
]


@pytest.mark.parametrize(("config", "option", "value", "rule"), OUT_OF_RANGE)
def test_value_out_of_range_names_the_option(config, option, value, rule, tmp_path, capsys):
    error = failing_run(capsys, "fit", small_run_args(config, tmp_path, None, option, value))
    assert error.startswith(f"error: {option} {rule}, got ") and error.count("\n") == 1


# cookiecutter: only with mlp
def test_more_stages_than_layers(tmp_path, capsys, shapes_root):
    args = small_run_args("mlp.yaml", tmp_path, shapes_root, "--model.init_args.num_stages", "3")
    error = failing_run(capsys, "fit", args)
    assert error.startswith("error: --model.init_args.num_stages 3 is more than the network's 2 layers;")


# cookiecutter: end


# cookiecutter: only with lstm
def test_missing_names_file(tmp_path, capsys):
    error = failing_run(
        capsys,
        "fit",
        small_run_args("lstm.yaml", tmp_path) + ["--data.init_args.names_path", str(tmp_path / "nope.txt")],
    )
    assert error.strip() == (
        f"error: names file {tmp_path / 'nope.txt'} does not exist; set --data.init_args.names_path (derive "
        "the default with scripts/prepare_pet_names.py)"
    )


def test_names_file_without_usable_names(tmp_path, capsys):
    names = tmp_path / "names.txt"
    names.write_text("R2D2\n\n¡Olé!\n")
    error = failing_run(
        capsys, "fit", small_run_args("lstm.yaml", tmp_path) + ["--data.init_args.names_path", str(names)]
    )
    assert "has no usable name: 3 of 3" in error


# cookiecutter: end


# cookiecutter: only with cnn
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


# cookiecutter: end


# cookiecutter: only with mlp
def test_missing_fashion_mnist_says_how_to_get_it(tmp_path, capsys):
    args = small_run_args("mlp_fashion_mnist.yaml", tmp_path) + ["--data.init_args.root", str(tmp_path)]
    error = failing_run(capsys, "fit", args)
    assert "FashionMNIST not found" in error and "--data.init_args.download true" in error


# cookiecutter: end


# cookiecutter: only with cnn
def test_pretrained_weights_offline_fail_fast(tmp_path, capsys, monkeypatch, shapes_root):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch-home"))
    error = failing_run(
        capsys, "fit", small_run_args("cnn.yaml", tmp_path, shapes_root) + ["--model.init_args.pretrained", "true"]
    )
    assert "pretrained weights" in error and "pretrained to false" in error


# cookiecutter: end


# cookiecutter: only with lstm
def test_failed_run_keeps_earlier_checkpoints_and_logs(tmp_path, capsys):
    run_cli("fit", small_run_args("lstm.yaml", tmp_path))
    before = {path: path.read_bytes() for path in tmp_path.rglob("*") if path.is_file()}
    assert any(path.name == "last.ckpt" for path in before) and any(path.name == "metrics.csv" for path in before)
    failing_run(
        capsys,
        "fit",
        small_run_args("lstm.yaml", tmp_path) + ["--data.init_args.names_path", str(tmp_path / "missing.txt")],
    )
    assert {path: path.read_bytes() for path in before} == before


def test_command_line_error_is_one_line_without_traceback(tmp_path):
    args = small_run_args("lstm.yaml", tmp_path) + ["--data.init_args.names_path", str(tmp_path / "missing.txt")]
    result = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "fit", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: names file")


# cookiecutter: end


# cookiecutter: only with cnn
def test_missing_dogs_data_says_what_how_and_which_flag(tmp_path, capsys):
    error = failing_run(capsys, "fit", small_run_args("cnn_dogs.yaml", tmp_path))
    assert "image folder data/dogs/Images does not exist" in error
    assert "images.tar" in error and "--data.init_args.root" in error


# cookiecutter: end
