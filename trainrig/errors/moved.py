"""Where the template's machinery moved when it was gathered into `trainrig/`, so that a config or command naming an
old path (`resume.checkpoint.ResumableCheckpoint`, say) fails with one line that names the new one.

`.template/update.py` reads the same table to list the lines of a project's own configs that still name old paths.
This module imports nothing, so the update script can load it from the project's files alone.
"""

import re

# Old module path -> new module path; a path under an old module moves with it (the longest old prefix wins).
MOVED_MODULES = {
    "errors": "trainrig.errors",
    "resume": "trainrig.resume",
    "strategies": "trainrig.strategies",
    "strategy_flag": "trainrig.strategies.flag",
    "launchers.dask": "trainrig.dask",  # cookiecutter: only with dask
    "cli_extensions.dask": "trainrig.dask.plugin",  # cookiecutter: only with dask
    "cli_extensions.wandb": "trainrig.wandb.plugin",  # cookiecutter: only with wandb
    "cli_extensions": "trainrig.registry",
    "logger_extensions.wandblogger": "trainrig.wandb.plugin",  # cookiecutter: only with wandb
    "logger_extensions": "trainrig.registry",
    "cluster_network": "trainrig.network",
    "cluster": "trainrig.kubernetes",  # cookiecutter: only with kubernetes
    "trainrig.kubernetes.pytorchjob": "trainrig.kubernetes.jobs",  # cookiecutter: only with kubernetes
    "sweeps": "trainrig.sweeps",  # cookiecutter: only with sweep
    "callbacks.media": "trainrig.loggers.media",
    "callbacks.config_to_loggers": "trainrig.loggers.run_config",
    "callbacks.model_summary": "trainrig.loggers.model_summary",
}

# Where a parser's error names the class it could not import.
CLASS_PATH_IN_ERROR = re.compile(r"class_path '(?P<path>[\w.]+)'")


def new_path(path: str) -> str | None:
    """`path` (a module, or a class in one) at its new place, or None if it did not move."""
    for old in sorted(MOVED_MODULES, key=len, reverse=True):
        if path == old or path.startswith(f"{old}."):
            return MOVED_MODULES[old] + path[len(old) :]
    return None


def moved_path_error(path: str) -> str | None:
    """One line for an old module or class path, or None for any other value."""
    if (moved := new_path(path)) is None:
        return None
    return f"{path} has moved to {moved} (the template's machinery lives in trainrig/ now): change it in your config"


def moved_class_path_error(message: str) -> str | None:
    """One line for the first old class path that a parser's error message names, or None."""
    found = (moved_path_error(match["path"]) for match in CLASS_PATH_IN_ERROR.finditer(message))
    return next((line for line in found if line is not None), None)


def class_paths(config) -> list[str]:
    """Every `class_path` value in a parsed config (nested dicts and lists), and a strategy named as a plain
    string: the values that name code."""
    if isinstance(config, dict):
        found = [config["class_path"]] if isinstance(config.get("class_path"), str) else []
        if isinstance(strategy := config.get("strategy"), str):
            found.append(strategy)
        return found + [path for value in config.values() for path in class_paths(value)]
    if isinstance(config, list):
        return [path for value in config for path in class_paths(value)]
    return []
