"""The checks that refuse a run with one line before it builds or writes anything, where Lightning's or jsonargparse's
own error would name the wrong thing, come late, or not come at all."""

from collections.abc import Collection
from pathlib import Path

import yaml

from trainrig.errors import UserInputError, one_line
from trainrig.errors.moved import class_paths, moved_path_error
from trainrig.registry import import_object
from trainrig.resume.latest import check_fits
from trainrig.resume.readable import check_same_parameters, forget_read_checkpoints
from trainrig.strategies.strategy_option import flag_values, strategy_class

__all__ = [
    "check_checkpoint_fits",
    "check_config_files_parse",
    "check_model_arguments_are_linked",
    "check_model_can_predict",
    "check_no_moved_class_path",
    "check_strategy_name",
]


def check_config_files_parse(args: list[str]) -> None:
    """A `--config` file whose YAML does not parse is named, with yaml's problem and line; jsonargparse's own error
    names neither the file nor the option."""
    for path in flag_values(args, "--config")[0]:
        if not Path(path).is_file():
            continue  # the parser says that it does not exist
        try:
            yaml.safe_load(Path(path).read_text())
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            problem = getattr(error, "problem", None) or one_line(error)
            raise UserInputError(f"--config {path} is not valid YAML: {problem}{where}") from error


def check_no_moved_class_path(config) -> None:
    """A config written before the machinery moved into trainrig/ fails with the new path, not an import error."""
    for path in class_paths(config.as_dict()):
        if (problem := moved_path_error(path)) is not None:
            raise UserInputError(problem)


def check_strategy_name(value) -> None:
    """A `--trainer.strategy` name that no strategy is registered under, refused with the names that are: Lightning's
    own error lists only some of its own."""
    from lightning.pytorch.strategies import StrategyRegistry

    if not isinstance(value, str) or value == "auto" or strategy_class(value) is not None:
        return
    if "." in value:
        raise UserInputError(f"--trainer.strategy {value}: no Strategy class at that import path")
    raise UserInputError(
        f"--trainer.strategy {value!r} is not a registered strategy; choose one of: auto, "
        f"{', '.join(sorted(StrategyRegistry))}, or a Strategy class path"
    )


def check_model_arguments_are_linked(data, data_to_model_links: Collection[str]) -> None:
    """A datamodule outside datamodules/ may list `model_arguments`, but no link was made for them: say so, rather
    than train a model that silently kept its own default."""
    if data is None or not isinstance(data.get("class_path"), str):
        return
    data_class = import_object(data.class_path)  # the parser imported it already
    unlinked = [name for name in getattr(data_class, "model_arguments", ()) if name not in data_to_model_links]
    if unlinked:
        raise UserInputError(
            f"{data.class_path}.model_arguments lists {', '.join(unlinked)}, but cli.py links model arguments only "
            "for the datamodules in datamodules/: move the class there"
        )


def check_model_can_predict(model) -> None:
    """A model class that defines neither `predict_step` nor `forward` is refused before `predict` builds anything:
    Lightning's own `predict_step` calls `forward`, and torch's missing `forward` fails with a traceback only once the
    checkpoint is read and the first batch is in."""
    from lightning.pytorch import LightningModule

    if model is None or not isinstance(model.get("class_path"), str):
        return
    model_class = import_object(model.class_path)  # the parser imported it already
    if model_class.predict_step is LightningModule.predict_step and model_class.forward is LightningModule.forward:
        raise UserInputError(
            f"--model {model.class_path} defines neither predict_step nor forward, so predict has nothing to run: add "
            "`def predict_step(self, batch, batch_idx)` returning the batch's predictions"
        )


def check_checkpoint_fits(model, ckpt_path: str | None, weights_only: bool = True) -> None:
    """The checkpoint's parameters, by name and shape, are the model's: else one line before the trainer runs. The last
    check before the run: the file they read once is let go."""
    try:
        check_fits(model, ckpt_path, weights_only)
        check_same_parameters(model, ckpt_path, weights_only)
    finally:
        forget_read_checkpoints()
