"""The `cli.py fit` arguments a launcher writes into a job, parsed by the training CLI's own parser before anything is
written: a misspelt option or a value of the wrong type after `--` is refused here, in one line with exit status 2,
not when the job runs on the cluster after its wait in the queue.

The project's `cli.py` (the user's choices: the data-to-model links, the trainer's defaults) is the one a launcher's
job runs from the project root, where every launcher is run; parsing it builds nothing (`--print_config`: no model,
data or trainer) and imports only what the config's class paths name.
"""

import contextlib
import importlib
import io
import sys

from trainrig.errors import UserInputError

__all__ = ["check_fit_arguments"]

PROJECT_CLI = "cli"  # cli.py at the project root, the working directory of every launcher
PRINT_CONFIG = "--print_config"


def check_fit_arguments(arguments: list[str]) -> None:
    """`cli.py fit ARGUMENTS` parsed as every process of the job will parse it; its one-line UserInputError if not.
    What parsing prints (the resolved config) is not shown: the job's own run prints it."""
    try:
        cli = importlib.import_module(PROJECT_CLI)
    except ModuleNotFoundError as error:
        if error.name != PROJECT_CLI:
            raise
        raise UserInputError("cli.py is not in the working directory: run this from the project root") from error
    printed = io.StringIO()
    program = sys.argv[0]
    sys.argv[0] = "cli.py"  # the parser's usage, named in its errors, is cli.py's
    try:
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            cli.run(["fit", *arguments, PRINT_CONFIG])
    except SystemExit as exit:
        if exit.code not in (0, None):
            raise
    finally:
        sys.argv[0] = program
