"""A user's mistake gives one clear line naming the problem, a non-zero exit, and destroys nothing (every example;
each example's own mistakes are in tests/examples/<example>/test_bad_input.py, an optional part's in its folder's)."""

import pytest

from tests.helpers.runs import EXAMPLE_CONFIGS, ROOT, run_cli, small_run_args
from tests.helpers.user_errors import failing_run


@pytest.mark.parametrize("config", EXAMPLE_CONFIGS)
def test_unknown_option_is_short_and_suggests_the_closest(config, tmp_path, capsys):
    error = failing_run(capsys, "fit", small_run_args(config, tmp_path) + ["--trainer.max_epochz", "1"])
    (line,) = error.splitlines()  # not the 60 lines of usage
    assert line.startswith("error: unknown option --trainer.max_epochz; did you mean --trainer.max_epochs")
    assert line.endswith(" fit --help)") and "(all options: " in line


def test_unknown_key_in_a_config_file_names_the_key(tmp_path, capsys):
    config_file = tmp_path / "mine.yaml"
    config_file.write_text("trainer:\n  max_stepz: 3\n")
    error = failing_run(capsys, "fit", small_run_args(EXAMPLE_CONFIGS[0], tmp_path) + ["--config", str(config_file)])
    assert error.splitlines()[0].startswith("error: unknown config key trainer.max_stepz")
    assert "did you mean --trainer.max_steps" in error and error.count("\n") == 1


def test_unknown_argument_of_the_data_class_suggests_its_own_arguments(tmp_path, capsys):
    args = small_run_args(EXAMPLE_CONFIGS[0], tmp_path) + ["--data.init_args.batch_sise", "3"]
    error = failing_run(capsys, "fit", args)
    assert "has no argument batch_sise" in error and "did you mean --data.init_args.batch_size?" in error
    assert error.count("\n") == 1


def test_invalid_trainer_setting_is_one_line(tmp_path, capsys):
    error = failing_run(capsys, "fit", small_run_args(EXAMPLE_CONFIGS[0], tmp_path) + ["--trainer.devices", "abc"])
    assert error.startswith("error: invalid trainer settings:") and "devices" in error and error.count("\n") == 1


def test_unknown_strategy_lists_this_projects_strategies(tmp_path, capsys):
    from lightning.pytorch.strategies import StrategyRegistry

    error = failing_run(capsys, "fit", small_run_args(EXAMPLE_CONFIGS[0], tmp_path) + ["--trainer.strategy", "nope"])
    assert error.startswith("error: --trainer.strategy 'nope' is not a registered strategy; choose one of: auto, ")
    assert "fsdp2" in error and all(name in error for name in StrategyRegistry)  # the project's registered too
    assert not any(tmp_path.iterdir())


def test_help_still_lists_every_option(capsys):
    with pytest.raises(SystemExit) as exit_info:
        run_cli("fit", ["--help"])
    assert exit_info.value.code == 0
    assert "--trainer.max_steps" in capsys.readouterr().out


@pytest.mark.parametrize("config", EXAMPLE_CONFIGS)
def test_wrong_value_type(config, tmp_path, capsys):
    error = failing_run(capsys, "fit", small_run_args(config, tmp_path) + ["--data.init_args.batch_size", "many"])
    assert error == "error: --data.init_args.batch_size must be a PositiveInt, got 'many'\n"


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


def test_a_config_written_before_the_move_names_the_new_class_path(tmp_path, capsys):
    """A user's config from before the machinery moved into trainrig/ names its old path; the error names the new one
    and nothing is written."""
    old_config = tmp_path / "old.yaml"
    old_config.write_text(
        (ROOT / "configs" / EXAMPLE_CONFIGS[0]).read_text().replace("trainrig.resume.", "resume."), encoding="utf-8"
    )
    args = small_run_args(EXAMPLE_CONFIGS[0], tmp_path) + ["--config", str(old_config)]
    error = failing_run(capsys, "fit", args)
    assert error == (
        "error: resume.csv_logger.ContinuingCSVLogger has moved to trainrig.resume.csv_logger.ContinuingCSVLogger:"
        " change it in your config\n"
    )
    assert sorted(path.name for path in tmp_path.iterdir()) == ["old.yaml"]


@pytest.mark.parametrize("options", [[], ["--trainer.strategy.init_args.timeout", "0:01:00"]])
def test_a_strategy_named_by_its_old_class_path_names_the_new_one(tmp_path, capsys, options):
    """Alone, the value reaches the CLI as a string; with options, the parser tries to import it as a class path."""
    args = small_run_args(EXAMPLE_CONFIGS[0], tmp_path, None, "--trainer.strategy", "strategy_flag.Mine", *options)
    error = failing_run(capsys, "fit", args)
    assert error.startswith("error: strategy_flag.Mine has moved to trainrig.strategies.strategy_option.Mine:")
    assert error.count("\n") == 1
    assert not any(tmp_path.iterdir()), "a refused run writes nothing"


def test_a_datamodule_outside_datamodules_with_unlinked_model_arguments_says_where_it_belongs(
    tmp_path, capsys, monkeypatch
):
    """cli.py links the `model_arguments` of the datamodules in datamodules/; one elsewhere that names others would
    leave the model on its defaults without a word."""
    (tmp_path / "elsewhere.py").write_text(
        "from lightning.pytorch import LightningDataModule\n\n\n"
        "class ElsewhereData(LightningDataModule):\n"
        '    model_arguments = ("vocabulary_of_elsewhere",)\n'
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    args = small_run_args(EXAMPLE_CONFIGS[0], tmp_path) + ["--data", "elsewhere.ElsewhereData"]
    error = failing_run(capsys, "fit", args)
    assert error == (
        "error: elsewhere.ElsewhereData.model_arguments lists vocabulary_of_elsewhere, but cli.py links model"
        " arguments only for the datamodules in datamodules/: move the class there\n"
    )
    assert sorted(path.name for path in tmp_path.iterdir() if path.name != "__pycache__") == ["elsewhere.py"]
