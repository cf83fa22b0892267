"""Short errors for bad options and config keys: the key, the closest valid ones, and where the full usage is.

jsonargparse prints the whole usage (60 lines for `fit`) before the one line that matters, and reports an
unknown argument, or a bad value, of a model or data class as a nested union error. This parser keeps what names
the problem: a bad value is one line naming the option.
"""

import difflib
import importlib
import inspect
import re
import sys
from typing import NoReturn

from jsonargparse import ArgumentParser
from lightning.pytorch.cli import LightningArgumentParser

from trainrig.errors.moved import moved_class_path_error

MAX_LINES = 10
UNKNOWN_ARGUMENTS = re.compile(r"unrecognized arguments: (?P<given>.+)")
UNKNOWN_CONFIG_KEY = re.compile(r"does not accept option '(?P<key>[^']+)'")
UNKNOWN_CLASS_ARGUMENT = re.compile(
    r'Parser key "(?P<key>[\w.]+)".*?class_path \'(?P<class_path>[\w.]+)\''
    r".*?Option '(?P<option>\w+)' is not accepted",
    re.S,
)
BAD_CLASS_ARGUMENT_VALUE = re.compile(
    r'Parser key "(?P<key>[\w.]+)".*?class_path \'[\w.]+\':\s*Parser key "(?P<argument>\w+)":\s*(?P<problem>[^\n]*\S)',
    re.S,
)
# A value outside a jsonargparse.typing type (PositiveInt, OpenUnitInterval, ...) in the signature.
RESTRICTION = re.compile(r"Not of type \w+: (?P<value>.+) does not conform to restriction (?P<rule>.+)")


class ShortErrorParser(LightningArgumentParser):
    """LightningCLI's parser, whose errors fit in a few lines and suggest the option that was probably meant."""

    def error(self, message: str, ex: Exception | None = None) -> NoReturn:
        if not self.exit_on_error:
            super().error(message, ex)
        parser = getattr(ex, "subcommand_parser", None) or self
        command = parser.prog.replace(" [options]", "")
        if (problem := moved_class_path_error(message) or bad_value(message)) is not None:
            lines = [f"error: {problem}"]
        else:
            first, *rest = short_message(message, parser)
            lines = [f"error: {first}", *rest, f"all options: {command} --help"]
        print("\n".join(lines[:MAX_LINES]), file=sys.stderr)
        sys.exit(2)


def short_message(message: str, parser: ArgumentParser) -> list[str]:
    """The problem, with 'did you mean' when a known option or argument is close to the one given."""
    if match := UNKNOWN_ARGUMENTS.search(message):
        given = [word for word in match["given"].split() if word.startswith("--")] or [match["given"]]
        return [f"unknown option {option}{did_you_mean(option, options_of(parser))}" for option in given]
    if match := UNKNOWN_CONFIG_KEY.search(message):
        option = "--" + match["key"]
        return [f"unknown config key {match['key']} (option {option}){did_you_mean(option, options_of(parser))}"]
    if match := UNKNOWN_CLASS_ARGUMENT.search(message):
        prefix = f"--{match['key']}.init_args."
        option = prefix + match["option"]
        known = [prefix + name for name in arguments_of(match["class_path"])]
        return [f"{match['class_path']} has no argument {match['option']} ({option}){did_you_mean(option, known)}"]
    return message.strip().splitlines()[: MAX_LINES - 1]


def bad_value(message: str) -> str | None:
    """The option of a model, data or logger class given a value its signature rejects, and why; else None."""
    if UNKNOWN_CLASS_ARGUMENT.search(message) or not (match := BAD_CLASS_ARGUMENT_VALUE.search(message)):
        return None
    if "Parser key" in match["problem"]:  # nested deeper (an optimizer's arguments): no single line to show
        return None
    option = f"--{match['key']}.init_args.{match['argument']}"
    if restricted := RESTRICTION.fullmatch(match["problem"]):
        rule = re.sub(r"v([<>=!]=?)", r"\1 ", restricted["rule"])
        return f"{option} must be {rule}, got {restricted['value']}"
    return f"{option}: {match['problem']}"


def did_you_mean(given: str, known: list[str]) -> str:
    """Options whose last part is close to the given one's, preferring those under the same prefix."""
    prefix, _, name = given.rpartition(".")
    by_name = {}
    for option in sorted(known, key=lambda option: not option.startswith(prefix + ".")):
        by_name.setdefault(option.rpartition(".")[2], option)
    close = [name] if name in by_name else difflib.get_close_matches(name, list(by_name), n=3, cutoff=0.7)
    return f"; did you mean {' or '.join(by_name[match] for match in close)}?" if close else ""


def options_of(parser: ArgumentParser) -> list[str]:
    """The long options the parser accepts, as its usage lists them."""
    return sorted(set(re.findall(r"--[\w.-]+", parser.format_usage())))


def arguments_of(class_path: str) -> list[str]:
    """The constructor arguments of a class given by its import path, along the classes it passes **kwargs to."""
    module_name, _, class_name = class_path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError):
        return []
    names = []
    for klass in inspect.getmro(cls):
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        parameters = list(inspect.signature(init).parameters.values())[1:]
        names += [p.name for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        if not any(p.kind == p.VAR_KEYWORD for p in parameters):
            break
    return names
