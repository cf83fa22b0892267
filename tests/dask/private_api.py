"""What the Dask launcher touches of distributed's private names."""


def _scheduler():
    from distributed import Scheduler

    return Scheduler(dashboard_address=None)


ATTRIBUTES = [
    (
        "distributed Scheduler",
        _scheduler,
        "_starting_nannies",
        "trainrig/dask/scheduler_side.py (nannies starting their first worker: a restart waits for them)",
    )
]
