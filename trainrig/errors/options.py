"""One-line errors for bad options and config keys: the key, the closest valid ones, and where the full usage is.

jsonargparse prints the whole usage (60 lines for `fit`) before the one line that matters, and reports an
unknown argument, or a bad value, of a model or data class as a nested union error. These parsers keep what names
the problem, in one line: they raise it as a UserInputError, which the entry point prints with exit status 2 after
dropping what the run had printed so far (trainrig/errors/held_output.py).
"""

import argparse
import difflib
import inspect
import re
import sys
from typing import NoReturn

from jsonargparse import ArgumentParser
from lightning.pytorch.cli import LightningArgumentParser
from typing_extensions import override

from trainrig.errors import UserInputError
from trainrig.errors.moved import moved_class_path_error
from trainrig.errors.user_code import class_path_problem
from trainrig.registry import import_object

UNKNOWN_ARGUMENTS = re.compile(r"unrecognized arguments: (?P<given>.+)")
UNKNOWN_CONFIG_KEY = re.compile(r"does not accept option '(?P<key>[^']+)'")
UNKNOWN_CLASS_ARGUMENT = re.compile(
    r'Parser key "(?P<key>[\w.]+)".*?class_path \'(?P<class_path>[\w.]+)\''
    r".*?Option '(?P<option>\w+)' is not accepted",
    re.S,
)
# A class's argument given a bad value: the key it was given as below the class's option, and the value.
NESTED_ARGUMENT = re.compile(r"Given value: NestedArg\(key='(?P<key>[\w.]+)', val=(?P<value>.*)\)\s*$")
QUOTES = ("'", '"')
INNER_KEY = re.compile(r'Parser key "\w+":')
NOT_OF_TYPE = re.compile(r"Not of type (?P<type>\w+):")
# A value outside a jsonargparse.typing type (PositiveInt, OpenUnitInterval, ...) in the signature.
RESTRICTION = re.compile(r"Not of type \w+: (?P<value>.+) does not conform to restriction (?P<rule>.+)")
# A value of the wrong type for an option: `Parser key "K":` then what was expected and what was given.
PARSER_KEY = re.compile(r'^\s*Parser key "(?P<key>[\w.]+)":\s*(?P<problem>.*)', re.S)
EXPECTED_TYPE = re.compile(r"Expected a <class '(?:\w+\.)*(?P<type>\w+)'>")
GIVEN_VALUE = re.compile(r"(?:Given value|Got value): (?P<value>[^\n]*)")
UNION_SUBTYPES = re.compile(r"Subtypes: \[(?P<types>[^\]]*)\]")
TYPE_NAME = re.compile(r"<class '(?:[\w]+\.)*(?P<name>\w+)'>|(?:[\w]+\.)*(?P<alias>\w+)\[")
# A YAML syntax error in a config file or value: yaml's problem and where.
YAML_PROBLEM = re.compile(r"Problems parsing config:.*\n(?P<problem>[^\n]+)\n\s+in [^,]+, line (?P<line>\d+)", re.S)


class ShortErrors:
    """A jsonargparse parser whose errors are one line that suggests the option probably meant, and that takes an
    option only as spelled: argparse would read `--trainer.max_epoch` as `--trainer.max_epochs`, which the same key
    in a YAML config is not."""

    @override
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **{"allow_abbrev": False, **kwargs})

    def error(self, message: str, ex: Exception | None = None) -> NoReturn:
        if not self.exit_on_error:
            super().error(message, ex)
        parser = getattr(ex, "subcommand_parser", None) or self
        raise UserInputError(one_line_problem(message, parser))


class ShortErrorParser(ShortErrors, LightningArgumentParser):
    """LightningCLI's parser, with one-line errors."""


class ShortErrorArgumentParser(ShortErrors, ArgumentParser):
    """A plain jsonargparse parser (the optional parts' entry points and launchers), with one-line errors."""


class OneLineArgumentParser(argparse.ArgumentParser):
    """A standard-library parser (the cluster tools) whose bad flags are one line, exit status 2, like every other
    bad input."""

    @override
    def parse_known_args(self, args=None, namespace=None):
        """An option is taken only as spelled, as in every parser of the project (argparse would take `--node` for
        `--nodes`), and an unknown one is named with the near ones before argparse misses a required one: `--node 2`
        is a misspelt `--nodes`, not a missing one."""
        given = sys.argv[1:] if args is None else list(args)
        known = [option for action in self._actions for option in action.option_strings]  # --help too, not in usage
        subcommands = {
            name
            for action in self._actions
            if action.choices and action.nargs == argparse.PARSER
            for name in action.choices
        }
        for word in given:
            if word == "--" or word in subcommands:  # the rest is the job's flags, or a subcommand's own parser's
                break
            option = word.split("=", 1)[0]
            if option.startswith("--") and option not in known:
                raise UserInputError(f"unknown option {option}{did_you_mean(option, known)} (see --help)")
        return super().parse_known_args(args, namespace)

    @override
    def error(self, message: str) -> NoReturn:
        raise UserInputError(f"{message} (see --help)")


def one_line_problem(message: str, parser: ArgumentParser) -> str:
    """What is wrong, naming the option; a problem with an option's name ends with where all options are listed."""
    if UNKNOWN_CLASS_ARGUMENT.search(message):
        problem = None
    else:
        problem = (
            moved_class_path_error(message)
            or user_class_problem(message)
            or nested_value(message)
            or wrong_value(message)
        )
    if problem is not None:
        return problem
    command = parser.prog.replace(" [options]", "")
    return f"{unknown_option(message, parser)} (all options: {command} --help)"


def user_class_problem(message: str) -> str | None:
    """A class path given to an option that does not import or misses a required argument (user_code.py)."""
    outer = PARSER_KEY.match(message)
    return class_path_problem(message, outer["key"]) if outer is not None else None


def unknown_option(message: str, parser: ArgumentParser) -> str:
    """The problem, with 'did you mean' when a known option or argument is close to the one given."""
    if match := UNKNOWN_ARGUMENTS.search(message):
        given = [word for word in match["given"].split() if word.startswith("--")] or [match["given"]]
        return "; ".join(f"unknown option {option}{did_you_mean(option, options_of(parser))}" for option in given)
    if match := UNKNOWN_CONFIG_KEY.search(message):
        option = "--" + match["key"]
        return f"unknown config key {match['key']} (option {option}){did_you_mean(option, options_of(parser))}"
    if match := UNKNOWN_CLASS_ARGUMENT.search(message):
        prefix = f"--{match['key']}.init_args."
        option = prefix + match["option"]
        known = [prefix + name for name in arguments_of(match["class_path"])]
        return f"{match['class_path']} has no argument {match['option']} ({option}){did_you_mean(option, known)}"
    return " ".join(line.strip() for line in message.strip().splitlines() if line.strip())


def nested_value(message: str) -> str | None:
    """An argument of a model, data, logger, optimizer or scheduler class given a value its signature rejects, as one
    line naming the option; None for other problems.

    jsonargparse reports it inside the union of the classes around it; the option is the outer key and the nested
    one it was given as, the problem what the innermost key says.
    """
    outer = PARSER_KEY.match(message)
    nested = NESTED_ARGUMENT.search(message)
    if outer is None or nested is None:
        return None
    option = f"--{outer['key']}.init_args.{nested['key']}"
    innermost = list(INNER_KEY.finditer(message))[-1]
    problem = message[innermost.end() :].split(". Got value:")[0]
    return describe(option, problem, nested["value"])


def wrong_value(message: str) -> str | None:
    """An option given a value of the wrong type or out of its range, a missing config file, or YAML that does not
    parse, as one line; None for other problems."""
    if match := YAML_PROBLEM.search(message):
        return f"a config is not valid YAML: {match['problem'].strip()} (line {match['line']}); fix the file or value"
    if not (match := PARSER_KEY.match(message)):
        return None
    given = GIVEN_VALUE.search(match["problem"])
    return describe(f"--{match['key']}", match["problem"], given["value"].strip() if given else None)


def describe(option: str, problem: str, value: str | None) -> str:
    """One line for `option` given `value`, from jsonargparse's `problem` with it."""
    if restricted := RESTRICTION.search(problem):
        rule = re.sub(r"v([<>=!]=?)", r"\1 ", restricted["rule"])
        return f"{option} must be {rule}, got {restricted['value']}"
    if problem.strip().startswith("File does not exist"):
        return f"{option}: {problem.strip().splitlines()[0]}"
    if not_of_type := NOT_OF_TYPE.search(problem):
        return f"{option} must be a {not_of_type['type']}, got {value}" if value else f"{option}: {problem.strip()}"
    if subtypes := UNION_SUBTYPES.search(problem):
        names = [match["name"] or match["alias"] for match in TYPE_NAME.finditer(subtypes["types"])]
    else:
        names = [match["type"] for match in EXPECTED_TYPE.finditer(problem)]
    expected = " or ".join(dict.fromkeys("None" if name == "NoneType" else name for name in names))
    if value is not None and expected:
        shown = value if value.startswith(QUOTES) else repr(value)
        return f"{option} expects {expected}, got {shown}"
    first = next((line.strip(" -") for line in problem.splitlines() if line.strip(" -")), "invalid value")
    return f"{option}: {first}"


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
    try:
        cls = import_object(class_path)
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
