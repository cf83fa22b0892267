"""Every option the parsers know, given a wrong value: one line naming the problem, exit 2, no traceback, and nothing
written (a folder holding an earlier run stays byte for byte the same).

The options are not listed here: they are the leaves of each shipped config resolved by `cli.py SUBCOMMAND
--print_config` (trainer, model, data, optimizer, scheduler and the parts' options), the fields of the optional
parts' own sections, and the arguments of the cluster tools' parsers. Each typed option gets a value of the wrong
type, and an option of a constrained type (PositiveInt, a unit interval, ...) a value out of its range. Each case
runs the entry point's `main` in this process; a handful run as real processes.
"""

import argparse
import contextlib
import importlib
import io
import os
import subprocess
import sys
import typing
from pathlib import Path

import pytest
import yaml

import cli
from tests.helpers.parts import declared, declared_items
from tests.helpers.runs import EXAMPLE_CONFIGS, ROOT, run_cli, small_run_args

SUBCOMMANDS = ("fit", "validate", "test", "predict")
LR_OPTION = "--model.init_args.optimizer.init_args.lr"
SHIPPED_CONFIGS = sorted(path.name for path in (ROOT / "configs").glob("*.yaml"))
# Values no typed option accepts, by the type of the option's resolved value.
WRONG_TYPE = {bool: "maybe", int: "abc", float: "abc"}
# Candidates for a value outside a constrained number's range; the first its type rejects is used.
OUT_OF_RANGE = ("-1", "0", "1", "1.5")
# Sections of the config whose options are a class's arguments, for the options left unset (null): their type is the
# argument's annotation; the optional parts add theirs (tests/helpers/parts.py).
SECTIONS = {"trainer": "lightning.pytorch.Trainer", **dict(declared_items("SECTIONS"))}
# Other entry points' own options (the rest are cli.py fit's), each with a wrong value: {module: [(option, value)]}.
ENTRY_POINT_CASES = declared_items("BAD_OPTIONS")
# The cluster tools: (the module with its `main`, the module whose `option_parser()` builds its parser).
TOOLS = declared("TOOLS")


def leaves(config, prefix=""):
    """(dotted key, value) for every scalar of a resolved config, lists of classes left out (callbacks)."""
    if isinstance(config, dict):
        for key, value in config.items():
            yield from leaves(value, f"{prefix}{key}.")
    elif not isinstance(config, list):
        yield prefix.rstrip("."), config


def constrained_type(key: str, resolved: dict):
    """The jsonargparse restricted type of a class's argument (`model.init_args.hidden_size`), or None."""
    parts = key.split(".")
    if len(parts) != 3 or parts[1] != "init_args":
        return None
    class_path = resolved.get(parts[0], {}).get("class_path", "")
    module, _, name = class_path.rpartition(".")
    annotation = getattr(getattr(importlib.import_module(module), name).__init__, "__annotations__", {}).get(parts[2])
    return annotation if getattr(annotation, "__module__", "").startswith("jsonargparse") else None


def unset_option_type(key: str, resolved: dict) -> type | None:
    """int, float or bool for an option left null whose annotation is one of them (or Optional of one)."""
    parts = key.split(".")
    if len(parts) == 2 and parts[0] in SECTIONS:
        module, _, name = SECTIONS[parts[0]].rpartition(".")
        owner = getattr(importlib.import_module(module), name)
    elif len(parts) == 3 and parts[1] == "init_args" and isinstance(resolved.get(parts[0]), dict):
        module, _, name = resolved[parts[0]].get("class_path", "").rpartition(".")
        owner = getattr(importlib.import_module(module), name)
    else:
        return None
    annotation = typing.get_type_hints(owner.__init__).get(parts[-1])
    kinds = [kind for kind in (typing.get_args(annotation) or (annotation,)) if kind is not type(None)]
    return kinds[0] if len(kinds) == 1 and kinds[0] in WRONG_TYPE else None


def out_of_range(annotation) -> str | None:
    for candidate in OUT_OF_RANGE:
        try:
            annotation(float(candidate) if "." in candidate else int(candidate))
        except ValueError:
            return candidate
    return None


def bad_inputs(subcommand: str, config: str, base: list[str]) -> list[tuple[str, str]]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        cli.main([subcommand, *base, "--print_config"])
    resolved = yaml.safe_load(out.getvalue())
    cases = []
    for key, value in leaves(resolved):
        if key in ("config", "ckpt_path") or key.endswith("class_path"):
            continue
        if type(value) in WRONG_TYPE:
            cases.append((f"--{key}", WRONG_TYPE[type(value)]))
        elif value is None and (kind := unset_option_type(key, resolved)) is not None:
            cases.append((f"--{key}", WRONG_TYPE[kind]))
        if (annotation := constrained_type(key, resolved)) is not None and (value := out_of_range(annotation)):
            cases.append((f"--{key}", value))
    return cases


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


@pytest.fixture(scope="module")
def earlier_run(tmp_path_factory, shapes_root) -> Path:
    """A folder holding a real earlier run, where every bad run would write."""
    folder = tmp_path_factory.mktemp("runs")
    run_cli("fit", small_run_args(EXAMPLE_CONFIGS[0], folder, shapes_root))
    return folder


def refusal(entry, args: list[str]) -> tuple[int | None, str]:
    """The exit status and stderr of an entry point's `main(args)` run in this process."""
    error = io.StringIO()
    with contextlib.redirect_stderr(error), contextlib.redirect_stdout(io.StringIO()):
        try:
            entry(args)
            code = 0
        except SystemExit as stop:
            code = stop.code
        except Exception as failure:  # noqa: BLE001 - a traceback is what this test finds
            code, error = 1, io.StringIO(f"Traceback: {type(failure).__name__}: {failure}")
    return code, error.getvalue()


def is_refused(code, stderr: str) -> bool:
    lines = stderr.splitlines()
    return code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in stderr


def tool_entries():
    for main_module, parser_module in TOOLS:
        entry = importlib.import_module(main_module).main
        yield main_module, entry, importlib.import_module(parser_module).option_parser()


def argparse_cases(parser: argparse.ArgumentParser) -> list[tuple[str, str]]:
    cases = []
    for action in parser._actions:
        option = next((name for name in action.option_strings if name.startswith("--")), None)
        if option is None or action.nargs == 0:
            continue
        if action.choices is not None:
            cases.append((option, "no-such-choice"))
        elif action.type in (int, float):
            cases.append((option, "abc"))
    return cases


@pytest.mark.parametrize(
    ("configs", "subcommands"),
    [
        pytest.param(EXAMPLE_CONFIGS[:1], ["fit"], id="fit-one-config"),
        *(
            pytest.param([config], SUBCOMMANDS, id=f"{config}-every-subcommand", marks=pytest.mark.slow)
            for config in SHIPPED_CONFIGS
        ),
    ],
)
def test_every_option_refuses_a_wrong_value_in_one_line_writing_nothing(earlier_run, capsys, configs, subcommands):
    """Counts: printed at the end (`pytest -s`), for the issue's closing note. Every shipped config with every
    subcommand (1152 bad inputs) takes minutes: marked slow, one test per config, so that the slow shares of CI
    (docs/testing.md) each take some; the default run walks `fit` of one config."""
    before = snapshot(earlier_run)
    tried, failures = 0, []
    for config in configs:
        for subcommand in subcommands:
            base = ["--config", str(ROOT / "configs" / config), "--trainer.logger.init_args.save_dir", str(earlier_run)]
            base += ["--trainer.default_root_dir", str(earlier_run), "--trainer.limit_train_batches", "1"]
            for option, value in bad_inputs(subcommand, config, base):
                tried += 1
                code, stderr = refusal(cli.main, [subcommand, *base, option, value])
                if not is_refused(code, stderr):
                    failures.append(f"{config} {subcommand} {option} {value}: exit {code}, {stderr.strip()[-200:]!r}")
    for module, cases in ENTRY_POINT_CASES:
        for option, value in cases:
            tried += 1
            code, stderr = refusal(importlib.import_module(module).main, [option, value])
            if not is_refused(code, stderr):
                failures.append(f"{module}.py {option} {value}: exit {code}, {stderr.strip()[-200:]!r}")
    for name, entry, parser in tool_entries():
        for option, value in argparse_cases(parser):
            tried += 1
            code, stderr = refusal(entry, [option, value])
            if not is_refused(code, stderr):
                failures.append(f"{name} {option} {value}: exit {code}, {stderr.strip()[-200:]!r}")
    with capsys.disabled():
        print(f"\nbad inputs tried: {tried}, refused in one line with exit 2: {tried - len(failures)}")
    assert snapshot(earlier_run) == before, "a refused run wrote into the folder of an earlier run"
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize(
    ("entry", "args", "expected"),
    [
        ("cli.py", ["fit", "--config", f"configs/{EXAMPLE_CONFIGS[0]}", f"{LR_OPTION}", "-3"], LR_OPTION),
        *declared("REFUSED_BY_A_PROCESS"),
    ],
)
def test_a_real_process_prints_one_line(entry, args, expected, tmp_path):
    """What a user sees: Lightning's start-up lines held back (the learning rate is refused after the seed is set),
    no usage, no traceback."""
    save_dir = ["--trainer.logger.init_args.save_dir", str(tmp_path)] if entry == "cli.py" else []
    result = subprocess.run(
        [sys.executable, str(ROOT / entry), *args, *save_dir],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith("error: ") and expected in result.stderr
    assert not any(tmp_path.iterdir())
