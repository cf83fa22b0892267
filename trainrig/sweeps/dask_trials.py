"""Trials as Dask jobs (`--sweep.ranks_per_trial`): each on an embedded cluster of its own, or on an existing cluster
holding `ranks_per_trial` workers of its own while it runs; there its rank 0, which may run on another machine than
the driver's files, reports to the driver through the scheduler.

Only the driver and the ranks of such trials import this (and Dask).
"""

import json
from pathlib import Path

from distributed import Client, Queue, Variable, get_client
from typing_extensions import override

from trainrig.errors import UserInputError
from trainrig.sweeps.channel import CONTINUE, PRUNE
from trainrig.sweeps.local_trials import LocalPlacement

CONNECT_TIMEOUT_S = 30
__all__ = ["DaskDriverSide", "WorkerGroups", "placement", "report_and_wait"]


def placement(address: str | None, ranks_per_trial: int, parallel: int):
    """Each trial on an embedded cluster of `ranks_per_trial` workers, or on as many workers of its own of the
    existing cluster at `address`."""
    if address is None:
        return LocalPlacement(("--dask.n_workers", str(ranks_per_trial)))
    return WorkerGroups(address, ranks_per_trial, parallel)


class WorkerGroups(LocalPlacement):
    """The existing cluster's workers, by name, split into `parallel` groups of `ranks_per_trial`; a running trial
    holds one (`--dask.workers`), so concurrent trials never share a worker. Each trial's launcher runs here."""

    def __init__(self, address: str, ranks_per_trial: int, parallel: int):
        super().__init__()
        self.client = Client(address, timeout=CONNECT_TIMEOUT_S)
        # The scheduler's own answer, not `scheduler_info()`'s cached copy, which the client's periodic refresh may
        # empty of workers (trainrig/dask/cluster.py's scheduler_workers; sweeps/ does not import the Dask launcher).
        workers = self.client.sync(self.client.scheduler.identity, n_workers=-1)["workers"]
        names = sorted(str(worker.get("name")) for worker in workers.values())
        needed = ranks_per_trial * parallel
        if len(names) < needed:
            raise UserInputError(
                f"--sweep.parallel {parallel} trials of --sweep.ranks_per_trial {ranks_per_trial} need {needed} "
                f"Dask workers; the cluster at {address} has {len(names)}"
            )
        self.free = [names[start : start + ranks_per_trial] for start in range(0, needed, ranks_per_trial)]

    @override
    def take(self) -> list[str]:
        return ["--dask.workers", json.dumps(self.free.pop(0))]

    @override
    def give_back(self, arguments: list[str]) -> None:
        self.free.append(json.loads(arguments[-1]))

    @override
    def channel(self, name: str, directory: Path) -> "DaskDriverSide":
        return DaskDriverSide(self.client, name)


def report_and_wait(name: str, step: int, value: float, timeout_s: float) -> bool:
    """Rank 0's side, inside its Dask task: report `value` at `step`, then whether the driver prunes the trial (False
    if it does not answer within `timeout_s`)."""
    client = get_client()
    Queue(f"{name}-reports", client=client).put({"step": step, "value": value})
    try:
        return Variable(f"{name}-decision-{step}", client=client).get(timeout=timeout_s) == PRUNE
    except TimeoutError:
        return False


class DaskDriverSide:
    """The driver's end of one trial's channel on the scheduler: reads new reports, writes decisions.

    Both live on the scheduler, so a driver started again finds reports and decisions its predecessor left.
    """

    transport = __name__  # the module whose report_and_wait rank 0 calls

    def __init__(self, client: Client, name: str):
        self.client, self.name = client, name
        self.channel = name
        self._reports = Queue(f"{name}-reports", client=client)

    def new_reports(self) -> list[tuple[int, float]]:
        count = self._reports.qsize()
        reports = self._reports.get(batch=count) if count else []
        return [(int(report["step"]), float(report["value"])) for report in reports]

    def decide(self, step: int, prune: bool) -> bool:
        """Set the decision for `step` unless one was set before; returns the decision that stands."""
        decision = Variable(f"{self.name}-decision-{step}", client=self.client)
        try:
            return decision.get(timeout=0) == PRUNE
        except TimeoutError:
            decision.set(PRUNE if prune else CONTINUE)
            return prune
