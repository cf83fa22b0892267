"""Trials as SLURM jobs (`--sweep.slurm_nodes`): the driver, on a login node, submits each trial as a job of its own
on that many nodes, the same `srun` of `cli.py fit` that `python -m trainrig.slurm.sbatch` writes; trainrig/sweeps/
slurm_trials.py runs them."""

from dataclasses import dataclass, fields
from pathlib import Path

from trainrig.errors import UserInputError
from trainrig.sweeps.options import SweepOptions

PREFIX = "slurm_"


@dataclass
class Options(SweepOptions):
    """A hyper-parameter sweep over `cli.py fit` runs (needs the `sweep` extra).

    Args:
        slurm_nodes: Run each trial as a SLURM job of its own on this many nodes, submitted from here (a login node;
            needs the `slurm` extra). The trial trains with the training arguments' `--trainer.strategy` (DDP by
            default) on every process of the job, as a batch script of `python -m trainrig.slurm.sbatch` does.
        slurm_gpus_per_node: GPUs per node, one training process each (0: CPU, one process per node).
        slurm_partition: The partition trials run in; by default the cluster's.
        slurm_account: The account trials are charged to.
        slurm_time: Each trial job's time limit (sbatch `--time`, e.g. 4:00:00); ahead of it the trial checkpoints
            and stops, and the driver submits it again from its checkpoint (counted in `max_restarts`).
        slurm_signal_lead: Seconds before the time limit at which a trial checkpoints and stops.
        slurm_cpus_per_task: CPU cores per training process.
    """

    slurm_nodes: int | None = None
    slurm_gpus_per_node: int = 0
    slurm_partition: str | None = None
    slurm_account: str | None = None
    slurm_time: str | None = None
    slurm_signal_lead: int = 300
    slurm_cpus_per_task: int | None = None


def placement(options: Options, base: dict, base_path: Path):
    if options.slurm_nodes is None:
        given = [f"--sweep.{field.name}" for field in fields(Options) if _given(options, field)]
        if given:
            raise UserInputError(f"{', '.join(given)} apply to trials on SLURM; add --sweep.slurm_nodes")
        return None
    from trainrig.sweeps.slurm_trials import SlurmTrials

    return SlurmTrials(options, base, base_path)


def _given(options: Options, field) -> bool:
    return field.name.startswith(PREFIX) and getattr(options, field.name) != field.default
