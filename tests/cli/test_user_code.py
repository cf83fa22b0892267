"""The user's own model, written the plain way, misspelt, broken or missing an argument: cli.py names the cause (see
trainrig/errors/user_code.py). A mistake in the command is one line with exit status 2; a bug in the code keeps its
traceback, with the user's file and line, and ends as every bug does (status 1, not 2)."""

import sys
import textwrap

import pytest

import cli
from tests.helpers.user_errors import failing_run
from trainrig.errors.user_code import UserCodeError

MODELS = """
    import torch
    from lightning.pytorch import LightningDataModule, LightningModule


    class Rows(LightningDataModule):
        def __init__(self, batch_size: int = 2) -> None:
            super().__init__()


    class Regressor(LightningModule):
        def __init__(self, num_features: int) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(num_features, 1)


    class OddOnly(LightningModule):
        def __init__(self, hidden: int = 8) -> None:
            super().__init__()
            raise ValueError("hidden must be odd")
"""
CONFIG = """
    trainer: {max_steps: 1, logger: false, enable_checkpointing: false}
    data:
      class_path: user_models.regression.Rows
"""


@pytest.fixture
def user_project(tmp_path, monkeypatch):
    """A config and a package `user_models` of the user's own: the regressor, one model that fails when built, and
    one module that imports a package nobody installed."""
    package = tmp_path / "user_models"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "regression.py").write_text(textwrap.dedent(MODELS))
    (package / "needs_package.py").write_text("import a_package_nobody_installed\n")
    config = tmp_path / "config.yaml"
    config.write_text(textwrap.dedent(CONFIG))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    yield ["--config", str(config), "--trainer.default_root_dir", str(tmp_path / "logs")]
    for name in [name for name in sys.modules if name.startswith("user_models")]:
        del sys.modules[name]


@pytest.mark.parametrize(
    ("model", "line"),
    [
        (
            "user_models.regression.Regresor",
            "--model user_models.regression.Regresor: user_models.regression has no class Regresor; did you mean "
            "Regressor?",
        ),
        (
            "user_models.regresion.Regressor",
            "--model user_models.regresion.Regressor: no module user_models.regresion; did you mean "
            "user_models.regression?",
        ),
        (
            "user_models.regression.Regressor",
            "--model.init_args.num_features of user_models.regression.Regressor is required and nothing sets it",
        ),
    ],
)
def test_a_mistake_in_naming_the_users_class_is_one_line(capsys, user_project, model, line):
    error = failing_run(capsys, "fit", [*user_project, "--model", model])
    assert error.startswith(f"error: {line}") and error.count("\n") == 1, error


@pytest.mark.parametrize(
    ("model", "raised", "where"),
    [
        ("user_models.needs_package.Model", "ModuleNotFoundError: No module named", "needs_package.py, line 1"),
        ("user_models.regression.OddOnly", "ValueError: hidden must be odd", "regression.py, line 20"),
    ],
)
def test_an_exception_in_the_users_code_is_a_bug_named_with_its_file_and_line(user_project, model, raised, where):
    with pytest.raises(UserCodeError) as bug:
        cli.main(["fit", *user_project, "--model", model])
    assert raised in str(bug.value) and where in str(bug.value)
    assert "a bug in that code" in str(bug.value)  # not bad input: cli.main re-raises it, Python exits 1
    assert bug.value.__cause__ is not None  # the code's own exception, whose traceback Python prints above the line
