"""The Dask launcher: the same cli.py run as DDP over the workers of a Dask cluster, one rank per worker.

One module per concern, on the client: `launch` (the attempts and restarts), `cluster` (connecting, choosing
workers), `ranks` (watching and stopping the ranks), `failures` (one line per failed rank), `run_files` (the run
directory on the client); on every worker: `worker` (the task that runs one rank), `rank_environment` (the rank's
variables and cluster environment), `results_to_client` (metrics, checkpoints and the run directory sent back); on
both: `description` (the run as one frozen value, made once on the client: the one module that reads the parsed
config's sections, and the only one the worker imports of the others). cli.py imports this package on every start
for the `dask` options, so it stays light: Dask itself is imported only by those modules, when a run asks for it.
"""

from dataclasses import dataclass


@dataclass
class DaskOptions:
    """Train with DDP across the workers of a Dask cluster, one rank per worker (needs the `dask` extra).

    Args:
        n_workers: Start an embedded LocalCluster with this many worker processes. With `address`,
            use only this many of the existing cluster's workers (by default all of them).
        address: Scheduler address of an existing cluster, e.g. tcp://HOST:8786.
        workers: With `address`, run on exactly these workers, named as `dask worker --name` named them (or by
            address); rank i on the i-th. Jobs sharing a cluster, such as a sweep's concurrent trials, each take
            their own. A worker its nanny restarts keeps its name, so a restarted job finds it again.
        restart: Restart the cluster's workers before the run, which clears their memory.
        max_restarts: How often a failed run starts all ranks again from the last checkpoint: a dead worker, a
            timed-out collective, any error but bad input. Default 3 on an existing cluster, where losing a
            machine is routine, and 1 on an embedded one, where a rank dies mostly of a bug or of memory that
            a second try repeats.
        min_workers: On an existing cluster, restart with as few as this many ranks when fewer healthy workers
            than ranks remain (each rank keeps its batch size and the learning rate, so the global batch
            shrinks). By default a restart needs as many workers as the run started with.
        replacement_timeout: The most seconds a restart waits for the failed attempt's workers while they are still
            coming back (a nanny starting a worker process again, a worker registering). A worker that cannot come
            back (its nanny gone, or none) ends the wait at once; this bounds a machine that keeps starting one.
        checkpoint_dir: A directory that every worker and this client can read (a shared or network filesystem):
            the checkpoints are written there, in the run's own folder (`<experiment>/<run>/checkpoints`), and
            restarted or resumed ranks read them from there, instead of rank 0 sending each one to this client.
    """

    n_workers: int | None = None
    address: str | None = None
    workers: list[str] | None = None
    restart: bool = False
    max_restarts: int | None = None
    min_workers: int | None = None
    replacement_timeout: float = 900.0
    checkpoint_dir: str | None = None


def dask_requested(options) -> bool:
    """Whether the parsed `dask` section (a Namespace or a DaskOptions) asks for a Dask launch."""
    return options is not None and (options.n_workers is not None or options.address is not None)
