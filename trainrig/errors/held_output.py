"""What a run prints to stderr before it is accepted, held back so that a refused run prints its one error line only.

Lightning says which accelerator it found when the trainer is built, and the seed it set before that; launchers
and `--ckpt_path last` say what they resolved. A run refused after that (a bad learning rate, a checkpoint that does
not fit) would print those lines before its error. Until `release()` (at the trainer's setup, by `ReleasedAtSetup`,
or where a launcher starts the run elsewhere), stderr and Lightning's own log handlers write
into a buffer; `release()` writes it out and lets the rest through. A run that fails with a user's mistake drops
the buffer; any other failure releases it first, for the traceback's context.
"""

import io
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from lightning.pytorch import Callback
from typing_extensions import override

__all__ = ["ReleasedAtSetup", "held_output", "on_release", "release"]

# Loggers that write to stderr through their own handler rather than through sys.stderr at the time of writing.
LIBRARY_LOGGERS = ("lightning.pytorch", "lightning.fabric", "lightning")


class _Held:
    def __init__(self) -> None:
        self.buffer = io.StringIO()
        self.actions: list[Callable[[], None]] = []  # what changes files, once the run is accepted
        self.stderr = sys.stderr
        self.handlers = [
            (handler, handler.stream)
            for name in LIBRARY_LOGGERS
            for handler in logging.getLogger(name).handlers
            if isinstance(handler, logging.StreamHandler) and handler.stream in (sys.stderr, sys.__stderr__)
        ]
        sys.stderr = self.buffer
        for handler, _ in self.handlers:
            handler.setStream(self.buffer)

    def restore(self, keep: bool) -> None:
        for handler, stream in self.handlers:
            handler.setStream(stream)
        if sys.stderr is self.buffer:
            sys.stderr = self.stderr
        if keep and (text := self.buffer.getvalue()):
            self.stderr.write(text)
            self.stderr.flush()


_current: _Held | None = None


@contextmanager
def held_output() -> Iterator[None]:
    """Hold stderr until `release()`; on a UserInputError (or exit 2) leaving the block, drop what was held."""
    global _current
    outer, _current = _current, _Held()
    held = _current
    try:
        yield
    except BaseException as error:
        from trainrig.errors import find_user_error

        refused = find_user_error(error) is not None or (isinstance(error, SystemExit) and error.code == 2)
        held.restore(keep=not refused)
        raise
    else:
        held.restore(keep=True)
    finally:
        _current = outer


def release() -> None:
    """The run is accepted: what was held goes out now, what follows is not held, and the actions wait no longer."""
    if _current is not None:
        _current.restore(keep=True)
        _current.buffer = io.StringIO()
        actions, _current.actions = _current.actions, []
        for action in actions:
            action()


def on_release(action: Callable[[], None]) -> None:
    """Run `action` (one that changes an earlier run's files) once the run is accepted; at once outside a held
    block; never if the run is refused."""
    if _current is None:
        action()
    else:
        _current.actions.append(action)


class ReleasedAtSetup(Callback):
    """Releases the held output once the trainer sets the run up: the strategy's checks of the model and data, the
    data's preparation and the datamodule's setup have passed by then."""

    @override
    def setup(self, trainer, pl_module, stage: str) -> None:
        release()
