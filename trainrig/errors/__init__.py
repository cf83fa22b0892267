"""Errors caused by the user's input rather than by a bug.

`cli.py` prints these as one line and exits with status 2; anything else keeps its traceback.
"""

import socket
import sys
from contextlib import contextmanager

DOWNLOAD_TIMEOUT_S = 15


class UserInputError(Exception):
    """Bad data, a bad path or a bad setting: the message says what is wrong and how to fix it."""


def find_user_error(error: BaseException) -> UserInputError | None:
    """The UserInputError behind `error`, also when a library re-raised it as another exception."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, UserInputError):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


def lost_peer(error: BaseException) -> BaseException | None:
    """The error behind `error` that says another process of the job went away (killed, crashed, unreachable).

    torch raises DistError subclasses for the store and the backends, but gloo reports a dead peer as a plain
    RuntimeError from its TCP transport; both mean a retry of the whole job can succeed.
    """
    distributed = sys.modules.get("torch.distributed")
    dist_error = getattr(distributed, "DistError", ())
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, dist_error) or (isinstance(error, RuntimeError) and "/gloo/transport/" in str(error)):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


def one_line(error: BaseException) -> str:
    """The user-facing line of an error, also when a DataLoader worker re-raised it with a traceback."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    marker = f"{UserInputError.__name__}: "
    for line in reversed(lines):
        if marker in line:
            return line.split(marker, 1)[1]
    return lines[-1] if lines else type(error).__name__


@contextmanager
def explained_download(what: str, remedy: str):
    """Turn a failed or stalled download into a UserInputError that says how to supply the file by hand."""
    previous_timeout = socket.getdefaulttimeout()
    socket.setdefaulttimeout(DOWNLOAD_TIMEOUT_S)
    try:
        yield
    except (OSError, RuntimeError) as error:
        raise UserInputError(f"could not download {what} ({one_line(error)}); {remedy}") from error
    finally:
        socket.setdefaulttimeout(previous_timeout)
