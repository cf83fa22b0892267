"""The exit statuses of every runnable module of the project, and the one way a user's mistake ends a process.

Launchers, cluster restart policies and the drivers of trials decide from the status alone whether a restart helps:

- `DONE` (0): the job finished;
- `BAD_INPUT` (2): the user's mistake, printed as one line (`error: ...`); a retry cannot help;
- `STOPPED` (143, 128 + SIGTERM): stopped by SIGTERM or SIGINT after every rank wrote its checkpoint;
- `LOST_PEER` (134, 128 + SIGABRT): another process of the job went away (killed, crashed, unreachable);
- anything else, 1 above all: a bug, with its traceback; also in the user's own model or data
  (trainrig/errors/user_code.py): an exception their code raises while imported or built is not bad input, the
  command is right, the code at the traceback's file and line is what to fix.

128 and above is what a process ended by a signal reports; a restart with `--ckpt_path last` resumes it.
"""

import functools
import signal
import sys
from collections.abc import Callable

from trainrig.errors import find_user_error, one_line

DONE = 0
BAD_INPUT = 2
STOPPED = 128 + signal.SIGTERM
LOST_PEER = 128 + signal.SIGABRT
KILLED = 128 + signal.SIGKILL  # what a process killed outright (kill -9, the OOM killer) reports; never exited with
# What a retry of the same command continues from its checkpoints.
RESTARTABLE = frozenset({STOPPED, LOST_PEER, KILLED})


def entry_point(main: Callable) -> Callable:
    """`main` of a runnable module, ending with one line and status 2 on a user's mistake (a UserInputError anywhere
    in the chain of what was raised, also when a library re-raised it) and with its traceback on anything else."""

    @functools.wraps(main)
    def run(*args, **kwargs):
        try:
            return main(*args, **kwargs)
        except Exception as error:
            if (user_error := find_user_error(error)) is None:
                raise
            print(f"error: {one_line(user_error)}", file=sys.stderr)
            sys.exit(BAD_INPUT)

    return run
