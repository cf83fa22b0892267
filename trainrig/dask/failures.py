"""Why a rank failed, in one line: the rank, the worker, and the cause under the symptoms."""

import logging
import re
import traceback
from collections.abc import Iterator
from contextlib import contextmanager

from distributed import Client
from typing_extensions import override

from trainrig.errors import UserInputError, find_user_error, lost_peer, one_line

log = logging.getLogger("trainrig.dask")

# After a first failure, how long to keep watching so that the report names a dead worker (the cause)
# rather than the other ranks' broken-connection errors (the symptom).
SETTLE_S = 2.0

URL_ONLY = re.compile(r"\S+://\S+")

DEATH_MESSAGE = re.compile(r"Worker process (\d+) (.+)")

REMOVAL_STIMULI = {
    "handle-worker-cleanup": "its connection to the scheduler closed",
    "check-worker-ttl": "the scheduler heard nothing from it for distributed.scheduler.worker-ttl",
}


class WorkerDeathLog(logging.Handler):
    """Keeps the nanny's "Worker process PID was killed by signal 9" lines, the cause of a death on an embedded
    cluster."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.reasons: dict[int, str] = {}

    @override
    def emit(self, record: logging.LogRecord) -> None:
        match = DEATH_MESSAGE.fullmatch(record.getMessage())
        if match:
            self.reasons[int(match.group(1))] = match.group(2)


@contextmanager
def recorded_worker_deaths() -> Iterator[dict[int, str]]:
    """pid -> how that worker process ended, as reported by the nannies running in this process."""
    handler = WorkerDeathLog()
    nanny_log = logging.getLogger("distributed.nanny")
    nanny_log.addHandler(handler)
    try:
        yield handler.reasons
    finally:
        nanny_log.removeHandler(handler)


class RankFailure(Exception):
    """Ranks of one attempt failed: which, on which worker, and why; `user_error` when a rank reported bad input;
    `stepped` when rank 0 had taken a training step."""

    def __init__(
        self,
        client: Client,
        failed: set[int],
        futures: list,
        workers: list[str],
        pids: dict[str, int],
        stepped: bool = False,
    ):
        super().__init__(failed)
        self.client, self.failed, self.futures, self.workers, self.pids = client, failed, futures, workers, pids
        self.stepped = stepped
        self.user_error = None
        if all(futures[rank].status == "error" for rank in failed):  # no dead worker: the ranks' own errors
            user_errors = [(rank, find_user_error(futures[rank].exception())) for rank in sorted(failed)]
            rank, user_error = next(((rank, error) for rank, error in user_errors if error is not None), (None, None))
            if user_error is not None:
                self.user_error = UserInputError(f"{self._where(rank)}: {one_line(user_error)}")

    def _where(self, rank: int) -> str:
        worker = self.workers[rank]
        return f"rank {rank} (Dask worker {worker}, pid {self.pids[worker]})"

    def _deaths(self, death_reasons: dict[int, str]) -> list[tuple[int, str]]:
        """(rank, what ended it) for ranks whose worker died or whose task was cancelled."""
        deaths = []
        for rank in sorted(self.failed):
            future, worker = self.futures[rank], self.workers[rank]
            if future.status == "cancelled":
                deaths.append((rank, "was cancelled outside this run"))
            elif future.status != "error":
                reason = death_reasons.get(self.pids[worker]) or removal_reason(self.client, worker)
                deaths.append((rank, f"died: {reason}"))
        return deaths

    def _errors(self) -> list[tuple[int, BaseException]]:
        return [
            (rank, self.futures[rank].exception())
            for rank in sorted(self.failed)
            if self.futures[rank].status == "error"
        ]

    def cause(self, death_reasons: dict[int, str]) -> frozenset[str]:
        """What failed, without ranks, addresses or numbers: equal for two attempts that failed the same way.

        A dead worker is the cause when there is one; else the ranks' own errors, broken connections to another
        rank only when nothing else failed.
        """
        if deaths := self._deaths(death_reasons):
            causes = [cause for _, cause in deaths]
        else:
            errors = self._errors()
            own = [error for _, error in errors if lost_peer(error) is None] or [error for _, error in errors]
            causes = [underlying_cause(error) for error in own]
        return frozenset(re.sub(r"\d+", "#", cause) for cause in causes)

    def report(self, death_reasons: dict[int, str], tracebacks: bool = False) -> str:
        """One line: a dead worker or a cancelled task is the cause; other ranks' errors then are broken connections.

        With `tracebacks`, the errors of ranks that raised on their own are also logged in full.
        """
        deaths = self._deaths(death_reasons)
        errors = [] if deaths else self._errors()  # else broken connections to the dead or cancelled rank
        for rank, error in errors if tracebacks else []:
            log.error(f"dask: {self._where(rank)} raised:\n{''.join(traceback.format_exception(error))}")
        reports = [f"{self._where(rank)} {cause}" for rank, cause in deaths]
        reports += [f"{self._where(rank)} failed: {underlying_cause(error)}" for rank, error in errors]
        # A rank still running when another timed out waiting for it is the one that hung.
        running = [
            f"rank {rank} (Dask worker {self.workers[rank]})"
            for rank, future in enumerate(self.futures)
            if rank not in self.failed and future.status == "pending"
        ]
        if running:
            reports.append(f"still running: {', '.join(running)}")
        return "; ".join(reports)


def underlying_cause(error: BaseException) -> str:
    """`Type: message` of `error` in one line; when its message ends in a bare URL (Dask's "Error during
    deserialization of the task graph ... see https://..."), of the exception that caused it, with the first
    sentence of the wrapper after it: the ModuleNotFoundError says what, the wrapper where."""
    line = one_line(error)
    if not (URL_ONLY.fullmatch(line) and error.__cause__ is not None):
        return f"{type(error).__name__}: {line}"
    root = error.__cause__
    while root.__cause__ is not None and root.__cause__ is not root:
        root = root.__cause__
    wrapper = " ".join(str(error).split()).split(". ")[0].rstrip(".")
    return f"{type(root).__name__}: {one_line(root)} ({type(error).__name__}: {wrapper})"


def removal_reason(client: Client, worker: str) -> str:
    """Why the scheduler dropped a worker whose nanny, if any, is not in this process to say how its process ended."""
    removals = [message for _, message in client.get_events(worker) if message.get("action") == "remove-worker"]
    stimulus = re.sub(r"-[\d.]+$", "", removals[-1]["stimulus_id"]) if removals else None
    explanation = REMOVAL_STIMULI.get(
        stimulus, f"the scheduler removed it ({stimulus})" if stimulus else "it left the cluster"
    )
    return f"{explanation}; see the worker's log (crashed, killed or out of memory?)"
