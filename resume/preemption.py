"""SIGTERM (a pod or node being reclaimed) or SIGINT (Ctrl-C) becomes: every rank checkpoints at the next step, then exits 143."""

import signal
import threading

from lightning.pytorch.strategies import Strategy

# 128 + SIGTERM: what a process killed by SIGTERM reports, and what a PyTorchJob `ExitCode` policy retries.
PREEMPTED_EXIT_CODE = 128 + signal.SIGTERM
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Preempted(SystemExit):
    """Raised on every rank once the checkpoint is written: the process ends with status 143, resumable."""

    def __init__(self) -> None:
        super().__init__(PREEMPTED_EXIT_CODE)


class StopSignals:
    """Records SIGTERM and SIGINT instead of dying on them, so that all ranks can agree on one step to stop at.

    A signal reaches one rank (a pod's process, the launching process) or all of them (Ctrl-C in a terminal);
    `requested_on_any_rank` turns either case into the same decision everywhere. Lightning's own SIGTERM handler
    broadcasts from rank 0 inside the handler, which misses a signal sent to another rank (Lightning issue #20806),
    so it is replaced while training runs and restored afterwards.
    """

    def __init__(self) -> None:
        self.received: signal.Signals | None = None
        self._previous: dict[signal.Signals, object] = {}

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signal handlers can only be set from the main thread (e.g. not inside a Dask task)
        for signum in STOP_SIGNALS:
            self._previous[signum] = signal.signal(signum, self._record)

    def restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _record(self, signum: int, frame) -> None:
        self.received = signal.Signals(signum)

    def requested_on_any_rank(self, strategy: Strategy) -> bool:
        """One collective per call: every rank must call it at the same step."""
        return strategy.reduce_boolean_decision(self.received is not None, all=False)
