"""Trials as Dask jobs (`--sweep.ranks_per_trial`): on embedded clusters of their own, or on disjoint workers of
an existing cluster (`--dask.address` among the training arguments); trainrig/sweeps/dask_trials.py runs them."""

from dataclasses import dataclass
from pathlib import Path

from trainrig.errors import UserInputError
from trainrig.sweeps.options import SweepOptions


@dataclass
class Options(SweepOptions):
    """A hyper-parameter sweep over `cli.py fit` runs (needs the `sweep` extra).

    Args:
        ranks_per_trial: Run each trial on its own embedded Dask cluster of this many workers, one DDP rank each
            (adds `--dask.n_workers`; needs the `dask` extra). Concurrent trials use disjoint workers and ports.
    """

    ranks_per_trial: int | None = None


def placement(options: Options, base: dict, base_path: Path):
    if options.ranks_per_trial is not None and options.ranks_per_trial < 1:
        raise UserInputError(f"--sweep.ranks_per_trial must be at least 1, got {options.ranks_per_trial}")
    address = (base.get("dask") or {}).get("address")
    if address is not None and options.ranks_per_trial is None:
        raise UserInputError(
            "trials on an existing Dask cluster (--dask.address) need --sweep.ranks_per_trial, the workers each "
            "trial holds, so that concurrent trials never share one"
        )
    if options.ranks_per_trial is None:
        return None
    from trainrig.sweeps.dask_trials import placement as dask_placement

    return dask_placement(address, options.ranks_per_trial, options.parallel)
