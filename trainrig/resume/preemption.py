"""SIGTERM (a pod or node being reclaimed) or SIGINT (Ctrl-C) becomes: every rank checkpoints at the same step, the
next one (one process) or the one after (several), then exits 143."""

import signal
import threading

import torch
from lightning.pytorch import Trainer
from torch import distributed

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


def skip_lightning_stop_broadcast_while_handled_here(trainer: Trainer) -> None:
    """In a run of several processes Lightning broadcasts rank 0's SIGTERM flag at the start of every training step
    and reads it on the host: a collective every step, and on NCCL a read that waits for the GPU. Only Lightning's own
    SIGTERM handler raises that flag; while the handlers above replace it (`StopSignals`, a launcher's worker), the
    flag stays down and every rank skips the broadcast, which `AgreedFlags` makes redundant. A run whose config leaves
    the template's stop handling out keeps Lightning's."""
    epoch_loop = trainer.fit_loop.epoch_loop
    broadcast = epoch_loop._broadcast_sigterm_tensor

    def unless_handled_here() -> None:
        if signal.getsignal(signal.SIGTERM) is not request_stop:
            broadcast()

    epoch_loop._broadcast_sigterm_tensor = unless_handled_here


def take_over_a_sigterm_lightning_received(trainer: Trainer) -> None:
    """A SIGTERM that came between Lightning's handlers going in (as the run starts) and the template's (as training
    starts) raised Lightning's flag, on which Lightning ends the run after the next step with exit status 0 and no
    checkpoint, on the one rank that got it where the step broadcast is skipped. The template lowers that flag and
    takes the signal as its own stop request: a checkpoint, the line saying so, exit status 143, on every rank."""
    connector = trainer._signal_connector
    if connector.received_sigterm:
        connector.received_sigterm = False
        request_stop()


class StopSignals:
    """While training runs, SIGTERM and SIGINT request a stop.

    A signal reaches one rank (a pod's process, the launching process) or all of them (Ctrl-C in a terminal);
    `AgreedFlags` turns either case into the same decision at the same step everywhere. Lightning's own SIGTERM
    handler broadcasts from rank 0 inside the handler, which misses a signal sent to another rank (Lightning issue
    #20806), so it is replaced while training runs and restored afterwards.
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


class AgreedFlags:
    """Flags that any rank may raise at any step (a stop request, a checkpoint due), seen by every rank at the same
    step, without a collective that every step waits for.

    One process sees its flags at once. Several exchange them in the background: `send` at the end of one step
    starts a MAX all_reduce of the flags, and `receive` at the end of the next step reads it, so every rank sees the
    flags raised anywhere up to a step one step later, the same step on every rank. By then every rank has sent the
    round (the step in between has collectives of its own, which no rank passes alone), so reading it waits for
    nothing. The flags are a CPU tensor exchanged over a gloo group of their own: no device stream is synchronized
    (a GPU run trains on nccl), and no training collective queues behind them. `receive(settle=True)` also exchanges
    the flags raised until now, blocking: at an epoch's last batch, so that a flag raised in an epoch is acted on
    before validation and the epoch's end, as with one process.
    """

    def __init__(self) -> None:
        self._group = None
        self._pending: tuple[distributed.Work, torch.Tensor] | None = None

    def open(self, world_size: int) -> None:
        """Every rank at the same point (creating the group is collective)."""
        self.close()
        if world_size > 1:
            self._group = distributed.new_group(backend="gloo")

    def close(self) -> None:
        """Waits for the round in flight, which every rank sent, and frees the group."""
        if self._pending is not None:
            self._pending[0].wait()
            self._pending = None
        if self._group is not None and distributed.is_initialized():
            distributed.destroy_process_group(self._group)
        self._group = None

    def receive(self, local: list[bool], settle: bool = False) -> list[bool]:
        """The flags raised on any rank: `local` itself with one process; with several, those sent a step ago, and
        with `settle` also `local`, exchanged now. Every rank calls it at the same steps with the same `settle`."""
        if self._group is None:
            return local
        agreed = torch.zeros(len(local))
        if self._pending is not None:
            work, agreed = self._pending
            work.wait()
            self._pending = None
        if settle:
            now = torch.tensor(local, dtype=torch.float32)
            distributed.all_reduce(now, op=distributed.ReduceOp.MAX, group=self._group)
            agreed = torch.maximum(agreed, now)
        return [bool(flag) for flag in agreed.tolist()]

    def send(self, local: list[bool]) -> None:
        """Starts the round that the next `receive` reads; every rank calls it at the same steps."""
        if self._group is None:
            return
        flags = torch.tensor(local, dtype=torch.float32)
        work = distributed.all_reduce(flags, op=distributed.ReduceOp.MAX, group=self._group, async_op=True)
        self._pending = (work, flags)
