"""SIGTERM (a pod or node being reclaimed) or SIGINT (Ctrl-C) becomes: every rank checkpoints at the next step, then
exits 143."""

import signal
import threading

from lightning.pytorch.strategies import Strategy

from trainrig.errors import exit_status

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

_received: signal.Signals | None = None


class Preempted(SystemExit):
    """Raised on every rank once the checkpoint is written: the process ends with status 143, resumable."""

    def __init__(self) -> None:
        super().__init__(exit_status.STOPPED)


def request_stop(signum: int = signal.SIGTERM, frame=None) -> None:
    """Ask the running training to checkpoint and stop at its next step; a signal handler, or called by a launcher."""
    global _received
    _received = signal.Signals(signum)


def received_stop() -> signal.Signals | None:
    return _received


def clear_stop_request() -> None:
    """Forget a handled request, so that the next job in the same process (a launcher's worker) starts clean."""
    global _received
    _received = None


def install_stop_handlers() -> dict:
    """Make SIGTERM and SIGINT request a stop instead of killing; must run on the main thread. Returns the old
    handlers."""
    return {signum: signal.signal(signum, request_stop) for signum in STOP_SIGNALS}


def restore_handlers(previous: dict) -> None:
    for signum, handler in previous.items():
        signal.signal(signum, handler)


class StopSignals:
    """While training runs, SIGTERM and SIGINT request a stop, which all ranks agree on at the same step.

    A signal reaches one rank (a pod's process, the launching process) or all of them (Ctrl-C in a terminal);
    `requested_on_any_rank` turns either case into the same decision everywhere. Lightning's own SIGTERM handler
    broadcasts from rank 0 inside the handler, which misses a signal sent to another rank (Lightning issue #20806),
    so it is replaced while training runs and restored afterwards.
    Where training does not run on the main thread (a launcher's task), the launcher installs the handlers and
    forwards stop requests itself.
    """

    def __init__(self) -> None:
        self._previous: dict = {}

    def install(self) -> None:
        clear_stop_request()
        if threading.current_thread() is threading.main_thread():
            self._previous = install_stop_handlers()

    def restore(self) -> None:
        restore_handlers(self._previous)
        self._previous = {}

    @property
    def received(self) -> signal.Signals | None:
        return received_stop()

    def requested_on_any_rank(self, strategy: Strategy) -> bool:
        """One collective per call: every rank must call it at the same step."""
        return strategy.reduce_boolean_decision(received_stop() is not None, all=False)
