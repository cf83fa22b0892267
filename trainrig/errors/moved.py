"""Where the template's machinery moved when it was gathered into `trainrig/`, so that a config or command naming an
old path (`resume.checkpoint.ResumableCheckpoint`, say) fails with one line that names the new one.

`.template/update.py` reads the same table to list the lines of a project's own configs that still name old paths.
This module imports nothing of the project, so the update script can load it from the project's files alone.
"""

import ast
import re
from pathlib import Path

# Old module path -> new module path; a path under an old module moves with it (the longest old prefix wins). An
# optional part lists its own moves in its folder (PART_MOVES), which a project without the part does not have.
MOVED_MODULES = {
    "errors": "trainrig.errors",
    "resume": "trainrig.resume",
    "strategies": "trainrig.strategies",
    "strategy_flag": "trainrig.strategies.flag",
    "trainrig.strategies.flag": "trainrig.strategies.strategy_option",
    "cli_extensions": "trainrig.registry",
    "logger_extensions": "trainrig.registry",
    "cluster_network": "trainrig.network",
    "callbacks.media": "trainrig.loggers.media",
    "callbacks.config_to_loggers": "trainrig.loggers.run_config",
    "callbacks.model_summary": "trainrig.loggers.model_summary",
    "trainrig.loggers.predictions": "trainrig.loggers.gathered_predictions",
    "trainrig.strategies.compile.DDPStrategy": "trainrig.strategies.compile.CompilingDDPStrategy",
    "trainrig.strategies.compile.SingleDeviceStrategy": "trainrig.strategies.compile.CompilingSingleDeviceStrategy",
}

# Each optional part's moves: MOVED_MODULES in this file of its folder, read as a literal rather than imported.
PART_MOVES = "moved_paths.py"


def moves_of_the_parts() -> dict[str, str]:
    """The moves the project's optional parts list (trainrig/PART/moved_paths.py)."""
    moves = {}
    for table in sorted(Path(__file__).resolve().parent.parent.glob(f"*/{PART_MOVES}")):
        (assignment,) = [node for node in ast.parse(table.read_text()).body if isinstance(node, ast.Assign)]
        moves |= ast.literal_eval(assignment.value)
    return moves


MOVED_MODULES |= moves_of_the_parts()

# Where a parser's error names the class it could not import.
CLASS_PATH_IN_ERROR = re.compile(r"class_path '(?P<path>[\w.]+)'")


def new_path(path: str) -> str | None:
    """`path` (a module, or a class in one) at its new place, or None if it did not move. A path that moved more than
    once (moved into trainrig/, then out of the module that held it) ends at its last place."""
    moved, seen = None, set()
    while (step := moved_once(moved or path)) is not None and step not in seen:
        moved = step
        seen.add(step)
    return moved


def moved_once(path: str) -> str | None:
    for old in sorted(MOVED_MODULES, key=len, reverse=True):
        if path == old or path.startswith(f"{old}."):
            return MOVED_MODULES[old] + path[len(old) :]
    return None


def moved_path_error(path: str) -> str | None:
    """One line for an old module or class path, or None for any other value."""
    if (moved := new_path(path)) is None:
        return None
    return f"{path} has moved to {moved}: change it in your config"


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
