"""Running the CLI in this process on a user's mistake: it must exit 2 with its one-line error."""

import pytest

import cli

__all__ = ["assert_out_of_range", "failing_run"]


def failing_run(capsys, subcommand: str, args: list[str]) -> str:
    """The error output of a run that stops on bad input (exit 2)."""
    with pytest.raises(SystemExit) as exit_info:
        cli.main([subcommand, *args])
    assert exit_info.value.code == 2
    return capsys.readouterr().err


def assert_out_of_range(capsys, args: list[str], option: str, value: str, rule: str) -> None:
    """`option value` after `args` stops with one line naming the option and its rule."""
    error = failing_run(capsys, "fit", [*args, option, value])
    assert error.startswith(f"error: {option} {rule}, got ") and error.count("\n") == 1
