"""Errors caused by the user's input rather than by a bug.

`cli.py` prints these as one line and exits with status 2; anything else keeps its traceback.
"""

import pickle
import re
import socket
import sys
from contextlib import contextmanager

DOWNLOAD_TIMEOUT_S = 15
# How torch.load's `weights_only=True` refuses a file that names code to run, and the part of its page that says what.
WEIGHTS_ONLY_REFUSAL = "Weights only load failed"
WEIGHTS_ONLY_REASON = re.compile(r"WeightsUnpickler error: (.+?\.)(?:\s|$)")
# The one way to load a checkpoint that holds more than plain data: the option Lightning's own load takes.
TRUST_OPTION = "--weights_only false"


class UserInputError(Exception):
    """Bad data, a bad path or a bad setting: the message says what is wrong and how to fix it."""


def find_user_error(error: BaseException) -> UserInputError | None:
    """The UserInputError behind `error`, also when a library re-raised it as another exception."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, UserInputError):
            return error
        if (refusal := unsafe_checkpoint(error)) is not None:  # Lightning's own load of a URL, say
            return refusal
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


def unsafe_checkpoint(error: BaseException, source: str = "--ckpt_path") -> UserInputError | None:
    """torch's refusal to unpickle a checkpoint that names code to run (`weights_only=True`), as the user's mistake
    in one line naming the opt-in; None for any other error. torch's own message is a page that suggests editing
    code."""
    if not isinstance(error, pickle.UnpicklingError) or WEIGHTS_ONLY_REFUSAL not in str(error):
        return None
    reason = found.group(1) if (found := WEIGHTS_ONLY_REASON.search(str(error))) else "not plain data"
    return UserInputError(
        f"checkpoint {source} holds more than tensors and plain data ({reason}), and loading it could run code: "
        f"pass {TRUST_OPTION} only for a file you trust"
    )


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
