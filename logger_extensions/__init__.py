"""What the project does with a logger beyond Lightning's Logger API: one module here per logger that needs more.

A module sets `LOGGER_CLASS` (the logger's class name) and may define:

- `RUN_FOLDER`: (init argument naming the experiment, its environment variable, init argument naming the run), for a
  logger whose runs live in save_dir/<experiment>/<run> (resume/latest.py finds and continues them);
- `pin_run(init_args) -> str | None`: name the run before a launcher's ranks start, so that every restart continues
  it; returns a line saying so, or None;
- `log_images(logger, key, images, caption)`, `log_table(logger, key, columns, rows, artifact_type)`: media the
  logger shows natively (callbacks/media.py writes files for the others);
- `save_config(logger, config)`: the resolved config as the logger's run config.

Import the logger's own library inside the functions: modules here are imported on every start.
"""

import importlib
import pkgutil
from functools import cache
from types import ModuleType

__all__ = ["extension", "run_folders"]


@cache
def _by_logger_class() -> dict[str, ModuleType]:
    modules = [importlib.import_module(f"{__name__}.{found.name}") for found in pkgutil.iter_modules(__path__)]
    return {module.LOGGER_CLASS: module for module in modules}


def extension(logger) -> ModuleType | None:
    """The module for `logger` (an instance or a class name), or None."""
    class_name = logger if isinstance(logger, str) else type(logger).__name__
    return _by_logger_class().get(class_name)


def run_folders() -> dict[str, tuple[str, str | None, str]]:
    """RUN_FOLDER by logger class name, for the loggers here that have one."""
    return {name: module.RUN_FOLDER for name, module in _by_logger_class().items() if hasattr(module, "RUN_FOLDER")}
