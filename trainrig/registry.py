"""How an optional part plugs in without the code that uses it naming it: the part's folder in this package holds a
module called `plugin.py`, and this registry finds it. Generation keeps or drops the folder, and with it the plugin.

The registry sits below everything that uses it: it imports no other module of the project, and finds the plugins by
their files, importing them only when first asked. A plugin module may define any of these:

- `add_arguments(parser)`: add the part's options to the CLI's parser (keep the module light: `--help` imports it).
- `checkpoint_root(config) -> str | None`: where `fit`'s checkpoints are, when not in the run's own folders.
- `run_elsewhere(cli, job) -> bool`: run the parsed subcommand elsewhere, each process calling `job(args)` (cli.run);
  True if it did.
- `release()`: close what the part opened, once the job has ended, successful or not.

A part that extends a logger beyond Lightning's Logger API sets `LOGGER_CLASS` (the logger's class name) and may
define:

- `RUN_FOLDER`: (init argument naming the experiment, its environment variable, init argument naming the run), for a
  logger whose runs live in save_dir/<experiment>/<run> (`--ckpt_path last` finds and continues them);
- `pin_run(init_args) -> str | None`: name the run before a launcher's ranks start, so that every restart continues
  it; returns a line saying so, or None;
- `log_images(logger, key, images, caption)`, `log_table(logger, key, columns, rows, artifact_type)`: media the
  logger shows natively (trainrig/loggers/media.py writes files for the others);
- `save_config(logger, config)`: the resolved config as the logger's run config.

Import heavy libraries inside the functions: every start imports every plugin.
"""

import importlib
from collections.abc import Callable
from functools import cache
from pathlib import Path
from types import ModuleType

__all__ = ["hooks", "import_object", "logger_extension", "plugins", "run_folders"]

PLUGIN_MODULE = "plugin"


@cache
def plugins() -> tuple[ModuleType, ...]:
    """Every part's plugin module, imported, in the order of the parts' folder names."""
    folders = sorted(path.parent.name for path in Path(__file__).parent.glob(f"*/{PLUGIN_MODULE}.py"))
    return tuple(importlib.import_module(f"{__package__}.{folder}.{PLUGIN_MODULE}") for folder in folders)


def hooks(name: str) -> list[Callable]:
    """Every plugin's function called `name`."""
    return [getattr(module, name) for module in plugins() if hasattr(module, name)]


def logger_extension(logger) -> ModuleType | None:
    """The plugin that extends `logger` (an instance or a class name), or None."""
    class_name = logger if isinstance(logger, str) else type(logger).__name__
    return next((module for module in plugins() if getattr(module, "LOGGER_CLASS", None) == class_name), None)


def run_folders() -> dict[str, tuple[str, str | None, str]]:
    """RUN_FOLDER by logger class name, for the loggers the plugins extend that have one."""
    return {module.LOGGER_CLASS: module.RUN_FOLDER for module in plugins() if hasattr(module, "RUN_FOLDER")}


def import_object(path: str) -> object:
    """The object a config or a reference names by its import path: `package.module.Name`, or `package.module:name`
    (a function sent to another process by reference). Raises ImportError or AttributeError when there is none."""
    module, separator, name = path.partition(":") if ":" in path else path.rpartition(".")
    if not separator or not module:
        raise ImportError(f"{path!r} is not an import path (package.module.Name)")
    return getattr(importlib.import_module(module), name)
