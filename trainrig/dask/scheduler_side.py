"""What the client asks the Dask scheduler about, run in the scheduler's process (`Client.run_on_scheduler`).

A module of its own, importing nothing: the scheduler imports it by name to run its functions, and the client's
other modules would bring torch and Lightning into the scheduler.
"""


def starting_nannies(dask_scheduler) -> int:
    """How many nannies have connected to the scheduler and are still starting their first worker process: a worker
    on its way that the scheduler does not list yet (a machine whose service manager starts `dask worker` again)."""
    return len(dask_scheduler._starting_nannies)
