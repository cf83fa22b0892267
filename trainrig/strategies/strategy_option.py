"""What `--trainer.strategy` names, read one way by the CLI and every launcher, and the one spelling of a strategy's
timeout (`--trainer.strategy.init_args.timeout`) that each launcher fills in when the user did not."""

import inspect
from datetime import timedelta

from trainrig.registry import import_object

__all__ = [
    "STRATEGY_FLAG",
    "TIMEOUT_FLAG",
    "flag_values",
    "parse_timeout",
    "strategy_class",
    "with_class_paths",
    "with_launcher_timeout",
]

STRATEGY_FLAG = "--trainer.strategy"
TIMEOUT_FLAG = f"{STRATEGY_FLAG}.init_args.timeout"


def strategy_class(value) -> type | None:
    """The class a `--trainer.strategy` value selects: a registered name (`ddp`, `pipeline`, ...), a class path, or a
    parsed `{class_path, init_args}`; None for `auto` and for anything that names no class."""
    from lightning.pytorch.strategies import StrategyRegistry

    if isinstance(value, dict):
        value = value.get("class_path", "")
    if not isinstance(value, str) or value == "auto":
        return None
    if value.lower() in StrategyRegistry:
        return StrategyRegistry[value.lower()]["strategy"]
    try:
        selected = import_object(value)
    except (ImportError, AttributeError, ValueError):
        return None
    return selected if isinstance(selected, type) else None


def with_class_paths(args: list[str]) -> list[str]:
    """Command-line arguments with `--trainer.strategy NAME` given as its class path, and the options the registry
    presets for the name, when options of the strategy follow (`--trainer.strategy ddp
    --trainer.strategy.init_args.timeout 0:10:00`).

    jsonargparse reads a bare name as a plain string, to which options cannot be added; a class path takes them.
    Without options the name stays (Lightning's registry resolves it; jsonargparse would read a lone class path as a
    string too).
    """
    if not any(arg.startswith(f"{STRATEGY_FLAG}.") for arg in args):
        return list(args)
    rewritten, at = [], 0
    for given, value in _occurrences(args, STRATEGY_FLAG):
        rewritten += [*args[at : given.start], STRATEGY_FLAG, *_class_path_and_presets(value)]
        at = given.stop
    return rewritten + list(args[at:])


def flag_values(args: list[str], flag: str) -> tuple[list[str], list[str]]:
    """The values `args` give `flag` (as `--flag value` or `--flag=value`), and the arguments without them."""
    occurrences = _occurrences(args, flag)
    taken = {index for given, _ in occurrences for index in range(given.start, given.stop)}
    return [value for _, value in occurrences], [arg for index, arg in enumerate(args) if index not in taken]


def _occurrences(args: list[str], flag: str) -> list[tuple[range, str]]:
    """Where `flag` is given a value in `args`: the indices of the arguments it takes, and the value. A flag that ends
    the arguments without a value is left to the parser to report."""
    found, at = [], 0
    while at < len(args):
        option, equals, value = args[at].partition("=")
        if option == flag and equals:
            found.append((range(at, at + 1), value))
        elif option == flag and at + 1 < len(args):
            found.append((range(at, at + 2), args[at + 1]))
            at += 1
        at += 1
    return found


def _class_path_and_presets(name: str) -> list[str]:
    from lightning.pytorch.strategies import StrategyRegistry

    entry = StrategyRegistry[name.lower()] if name.lower() in StrategyRegistry else None
    presets = entry["init_params"].items() if entry else ()
    if entry is None or not all(isinstance(value, str | bool | int | float) for _, value in presets):
        return [name]
    selected = entry["strategy"]
    options = [f"{STRATEGY_FLAG}.init_args.{key}={value}" for key, value in presets]
    return [f"{selected.__module__}.{selected.__qualname__}", *options]


def with_launcher_timeout(value, default: type, timeout: timedelta) -> dict:
    """`value` as a `{class_path, init_args}` entry (`default` for `auto`), its timeout `timeout` unless the user set
    one: a strategy left at its class's default (torch's 30 minutes) gets the launcher's shorter one."""
    selected = strategy_class(value) or default
    init_args = {}
    if isinstance(value, str) and value.lower() != "auto":
        from lightning.pytorch.strategies import StrategyRegistry

        if value.lower() in StrategyRegistry:
            init_args = dict(StrategyRegistry[value.lower()]["init_params"])
    elif isinstance(value, dict):
        init_args = dict(value.get("init_args") or {})
    parameter = init_parameter(selected, "timeout")
    if parameter is not None and _as_timedelta(init_args.get("timeout")) in (None, parameter.default):
        init_args["timeout"] = str(timeout)
    return {"class_path": f"{selected.__module__}.{selected.__qualname__}", "init_args": init_args}


def init_parameter(cls: type, name: str) -> inspect.Parameter | None:
    """The `__init__` parameter `name` of `cls`, also where a subclass passes it on through `**kwargs` (the compiling
    DDP strategy takes Lightning's DDP arguments that way)."""
    for klass in cls.__mro__:
        if (init := vars(klass).get("__init__")) is None:
            continue
        parameters = inspect.signature(init).parameters
        if name in parameters:
            return parameters[name]
        if not any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters.values()):
            return None
    return None


def parse_timeout(value: str) -> timedelta:
    """A `--trainer.strategy.init_args.timeout` value (H:MM:SS, as Lightning reads it), checked before anything
    starts."""
    from trainrig.errors import UserInputError

    try:
        timeout = _as_timedelta(value)
    except ValueError:
        timeout = None
    if timeout is None or timeout <= timedelta(0):
        raise UserInputError(f"{TIMEOUT_FLAG} must be a positive duration as H:MM:SS (e.g. 0:10:00), got {value!r}")
    return timeout


def _as_timedelta(value) -> timedelta | None:
    if value is None or isinstance(value, timedelta):
        return value
    hours, minutes, seconds = (float(part) for part in str(value).split(":"))
    return timedelta(hours=hours, minutes=minutes, seconds=seconds)
