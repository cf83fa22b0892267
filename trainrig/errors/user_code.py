"""What stops the command's own model, data or other class from being found or built, named: jsonargparse reports
each as `--model expects LightningModule or None, got ...`, the cause left out.

- A class path that does not exist is the user's input: one line naming the module or class that is missing, and
  the names near it (exit 2).
- A required argument of the class that nothing sets is named, with where it comes from (exit 2).
- An exception raised while importing the code a class path names (a missing package, a syntax error, an error in
  the module's own code) or by the class while it is built is a bug in that code, not a mistake in the command: it
  keeps its traceback, the user's file and line, and ends the process with status 1 as every bug does
  (trainrig/errors/exit_status.py), so that no launcher takes it for a bad value of one run, and
  a cluster's restart policy does not retry it. A UserInputError the class raises itself stays the user's mistake.
"""

import difflib
import importlib
import inspect
import pkgutil
import re
import traceback
from types import ModuleType

__all__ = ["UserCodeError", "building_error", "class_path_problem", "raised_while_building", "where_raised"]

CLASS_PATH_PROBLEM = re.compile(r"Problem with given class_path '(?P<class_path>[\w.]+)':\s*(?P<problem>[^\n]+)")
GIVEN_CLASS = re.compile(r"Given value: Namespace\(class_path='(?P<class_path>[\w.]+)'")
JSONARGPARSE = "/jsonargparse/"  # where jsonargparse's own frames are
REQUIRED = re.compile(r"the following arguments are required: (?P<names>[\w, ]+)")


class UserCodeError(Exception):
    """The code a class path names raised while being imported: a bug in that code or its environment, shown with
    its traceback (exit status 1), never as bad input."""


def class_path_problem(message: str, key: str) -> str | None:
    """One line for a class path given to `--key` that does not import or misses a required argument; None for every
    other problem. Raises UserCodeError, from the code's own exception, when importing the code fails inside it."""
    if (match := CLASS_PATH_PROBLEM.search(message)) is None:
        return None
    class_path = match["class_path"]
    if required := REQUIRED.search(match["problem"]):
        names = [name.strip() for name in required["names"].split(",") if name.strip()]
        options = " and ".join(f"--{key}.init_args.{name}" for name in names)
        source = "; or, when the data knows it, name it in the datamodule's model_arguments" if key == "model" else ""
        return f"{options} of {class_path} is required and nothing sets it: give it in the config or as a flag{source}"
    problem = import_problem(class_path, key)
    return f"--{key} {class_path}: {problem}" if problem is not None else None


def import_problem(class_path: str, key: str) -> str | None:
    """Which part of a dotted class path is missing, with the names near it; None when it imports (or has no module
    part: jsonargparse resolves a bare class name itself)."""
    parts = class_path.split(".")
    for end in range(len(parts) - 1, 0, -1):
        module_name = ".".join(parts[:end])
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name is not None and (module_name + ".").startswith(error.name + "."):
                continue  # this module, or a package above it, does not exist: the shorter path says which
            raise code_error(module_name, class_path, key, error) from error
        except Exception as error:  # whatever the module's own code raises
            raise code_error(module_name, class_path, key, error) from error
        return missing_attribute(module, parts[end:])
    return None if len(parts) == 1 else f"no module {parts[0]}"


def missing_attribute(module: ModuleType, names: list[str]) -> str | None:
    """The first of `names`, looked up from `module` on, that does not exist, with the names there near it."""
    owner = module
    for index, name in enumerate(names):
        if hasattr(owner, name):
            owner = getattr(owner, name)
            continue
        where = f"{module.__name__}.{'.'.join(names[:index])}".rstrip(".")
        is_module = index < len(names) - 1 and isinstance(owner, ModuleType)
        known = submodules(owner) if is_module else [member for member, _ in inspect.getmembers(owner, inspect.isclass)]
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        if is_module:
            suggestion = f"; did you mean {' or '.join(f'{where}.{near}' for near in close)}?" if close else ""
            return f"no module {where}.{name}{suggestion}"
        suggestion = f"; did you mean {' or '.join(close)}?" if close else ""
        return f"{where} has no class {name}{suggestion}"
    return None


def submodules(package: ModuleType) -> list[str]:
    """The modules of a package, imported or not."""
    return [found.name for found in pkgutil.iter_modules(getattr(package, "__path__", []))]


def code_error(module_name: str, class_path: str, key: str, error: BaseException) -> UserCodeError:
    """The bug, raised from the code's own exception, whose traceback then shows without the parser's (it was
    raised while jsonargparse handled its own error)."""
    error.__suppress_context__ = True
    return UserCodeError(
        f"importing {module_name} for --{key} {class_path} raised {type(error).__name__}: {error} "
        f"({where_raised(error)}): a bug in that code or a package it needs, not in this command"
    )


def where_raised(error: BaseException) -> str:
    """The file and line the error comes from: the user's own, not importlib's frames."""
    if isinstance(error, SyntaxError) and error.filename:
        return f"{error.filename}, line {error.lineno}"
    frames = [frame for frame in traceback.extract_tb(error.__traceback__) if not frame.filename.startswith("<")]
    return f"{frames[-1].filename}, line {frames[-1].lineno}" if frames else "no file"


def raised_while_building(error: BaseException) -> BaseException | None:
    """What a class's own code raised while jsonargparse built it, which jsonargparse re-raises as its own error (for
    a model or data class: "Does not validate against any of the Union subtypes", the cause among its lines); None
    for any other error, and for the user's mistake that the class refused (a UserInputError)."""
    from trainrig.errors import find_user_error

    frames = traceback.extract_tb(error.__traceback__)
    if error.__cause__ is None or not frames or JSONARGPARSE not in frames[-1].filename:
        return None
    return None if find_user_error(error) is not None else error.__cause__


def building_error(error: BaseException, cause: BaseException) -> UserCodeError:
    built = f" {match['class_path']}" if (match := GIVEN_CLASS.search(str(error))) else " a class of the config"
    return UserCodeError(
        f"building{built} raised {type(cause).__name__}: {cause} ({where_raised(cause)}): a bug in that code, not in "
        "this command"
    )
