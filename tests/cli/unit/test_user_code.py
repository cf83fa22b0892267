"""What the user's own code gets when a class path does not import or misses an argument (trainrig/errors/user_code.py),
and an option given only in part (trainrig/errors/options.py): each named in one line, a bug in the code kept a bug.
tests/cli/test_user_code.py runs the same mistakes through cli.py."""

import sys
import textwrap

import pytest

import datamodules
from trainrig.errors import UserInputError
from trainrig.errors.options import OneLineArgumentParser, ShortErrorArgumentParser
from trainrig.errors.user_code import UserCodeError, class_path_problem

REGRESSOR = """
    from lightning.pytorch import LightningModule


    class Regressor(LightningModule):
        def __init__(self, num_features: int) -> None:
            super().__init__()
"""
NEEDS_A_PACKAGE = """
    from lightning.pytorch import LightningModule
    import a_package_nobody_installed


    class Broken(LightningModule):
        pass
"""


def parser_message(class_path: str, problem: str) -> str:
    """How jsonargparse reports a class path of `--model` it could not use."""
    return (
        'Parser key "model":\n  Does not validate against any of the Union subtypes\n  Errors:\n'
        f"    - Problem with given class_path '{class_path}':\n        {problem}\n"
    )


@pytest.fixture
def user_package(tmp_path, monkeypatch):
    """A package of the user's own, `own_models`, importable as a config names it."""
    package = tmp_path / "own_models"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "regressor.py").write_text(textwrap.dedent(REGRESSOR))
    (package / "broken.py").write_text(textwrap.dedent(NEEDS_A_PACKAGE))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield package
    for name in [name for name in sys.modules if name.startswith("own_models")]:
        del sys.modules[name]


def test_a_misspelt_class_is_named_with_its_module_and_the_near_names(user_package):
    message = parser_message("own_models.regressor.Regresor", "module has no attribute 'Regresor'")
    assert class_path_problem(message, "model") == (
        "--model own_models.regressor.Regresor: own_models.regressor has no class Regresor; did you mean Regressor?"
    )


def test_a_misspelt_module_is_named_with_the_near_modules(user_package):
    message = parser_message("own_models.regresor.Regressor", "module 'own_models' has no attribute 'regresor'")
    assert class_path_problem(message, "model") == (
        "--model own_models.regresor.Regressor: no module own_models.regresor; did you mean own_models.regressor?"
    )
    assert class_path_problem(parser_message("no_such_package.Model", "..."), "model") == (
        "--model no_such_package.Model: no module no_such_package"
    )


def test_an_import_error_inside_the_users_module_is_a_bug_with_its_file_and_line(user_package):
    message = parser_message("own_models.broken.Broken", "No module named 'a_package_nobody_installed'")
    with pytest.raises(UserCodeError) as raised:
        class_path_problem(message, "model")
    assert str(raised.value) == (
        "importing own_models.broken for --model own_models.broken.Broken raised ModuleNotFoundError: No module named "
        f"'a_package_nobody_installed' ({user_package / 'broken.py'}, line 3): a bug in that code or a package it "
        "needs, not in this command"
    )
    assert isinstance(raised.value.__cause__, ModuleNotFoundError)  # its traceback shows the user's line


def test_a_required_argument_nothing_sets_is_named(user_package):
    message = parser_message("own_models.regressor.Regressor", "the following arguments are required: num_features")
    assert class_path_problem(message, "model") == (
        "--model.init_args.num_features of own_models.regressor.Regressor is required and nothing sets it: give it "
        "in the config or as a flag; or, when the data knows it, name it in the datamodule's model_arguments"
    )


def test_a_class_path_that_imports_is_left_to_the_other_messages(user_package):
    message = parser_message("own_models.regressor.Regressor", "Option 'hidden' is not accepted")
    assert class_path_problem(message, "model") is None


@pytest.mark.parametrize(
    ("parser", "line"),
    [
        (ShortErrorArgumentParser, "unknown option --max_epoch; did you mean --max_epochs?"),
        (OneLineArgumentParser, "unknown option --max_epoch; did you mean --max_epochs? (see --help)"),
    ],
)
def test_an_option_is_taken_only_as_spelled(parser, line):
    options = parser(prog="tool")
    options.add_argument("--max_epochs", type=int)
    assert options.parse_args(["--max_epochs", "3"]).max_epochs == 3
    with pytest.raises(UserInputError) as refused:
        options.parse_args(["--max_epoch", "3"])
    assert str(refused.value).startswith(line)


def test_an_unknown_option_of_a_tool_is_named_before_a_missing_required_one():
    options = OneLineArgumentParser(prog="tool")
    options.add_argument("--nodes", type=int, required=True)
    with pytest.raises(UserInputError, match=r"^unknown option --node; did you mean --nodes\? \(see --help\)$"):
        options.parse_args(["--node", "2"])


def test_a_tool_takes_the_help_option_its_refusals_point_to(capsys):
    """`--help`, which every refusal names ("(see --help)"), though the usage line shows only `-h`."""
    options = OneLineArgumentParser(prog="tool")
    options.add_argument("--nodes", type=int, required=True)
    with pytest.raises(SystemExit) as exited:
        options.parse_args(["--help"])
    assert exited.value.code == 0 and "--nodes NODES" in capsys.readouterr().out


def test_a_datamodule_that_does_not_import_leaves_the_others_links(tmp_path, monkeypatch):
    (tmp_path / "zz_broken_data.py").write_text("import a_package_nobody_installed\n")
    (tmp_path / "zz_working_data.py").write_text(
        "from lightning.pytorch import LightningDataModule\n\n\n"
        "class Working(LightningDataModule):\n    model_arguments = ('num_features',)\n"
    )
    monkeypatch.setattr(datamodules, "__path__", [*datamodules.__path__, str(tmp_path)])
    monkeypatch.delitem(sys.modules, "datamodules.zz_working_data", raising=False)
    found = datamodules.model_arguments.__wrapped__()
    assert found == (*datamodules.model_arguments(), "num_features")  # the others still hand their values on
