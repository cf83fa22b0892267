"""A Dask worker preload that makes a worker's start slow, as on a loaded machine, once a marker file exists: the
workers a cluster starts with come up at once, the ones a nanny starts again after a death take `SLOW_START_S`.

Named by its path in a cluster's `preload`; the marker and the delay come in the worker's environment.
"""

import os
import time
from pathlib import Path

MARK_VARIABLE = "SLOW_START_MARK"
SECONDS_VARIABLE = "SLOW_START_S"


def dask_setup(worker) -> None:
    """Runs before the worker registers with the scheduler: the scheduler does not list it while this sleeps."""
    if Path(os.environ[MARK_VARIABLE]).exists():
        time.sleep(float(os.environ[SECONDS_VARIABLE]))
