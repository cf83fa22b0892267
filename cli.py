r"""Train, validate, test or predict with any example; this file holds your choices for every run.

    python cli.py fit --config configs/EXAMPLE.yaml                                                   # one device
    python cli.py fit --config configs/EXAMPLE.yaml --trainer.strategy ddp --trainer.devices 2  # 2 processes, 1 machine
    torchrun --nproc_per_node 2 cli.py fit --config configs/EXAMPLE.yaml --trainer.strategy ddp --trainer.devices 2
    torchrun --nnodes 2 --nproc_per_node 1 --rdzv_backend c10d --rdzv_id job --rdzv_endpoint FIRST_MACHINE:29400 \
        -m cli fit --config configs/EXAMPLE.yaml --trainer.strategy ddp --trainer.devices 1 --trainer.num_nodes 2
    python -m trainrig.slurm.sbatch --nodes 2 --config configs/EXAMPLE.yaml --output job.sbatch && sbatch job.sbatch
    python -m trainrig.kubernetes.jobs --name job --image IMAGE --nodes 2 --config configs/EXAMPLE.yaml \
        | kubectl apply -f -

The fourth command runs on each of 2 machines, the first adding `--rdzv_conf is_host=1` (docs/machines.md).
`validate`, `test` and `predict` take the same flags, `--help` lists them, and `--ckpt_path last` continues a stopped
run. The rest is machinery, in trainrig/ (this command's in trainrig/cli/): your model and data need no change there.
"""

from datamodules import model_arguments
from trainrig.cli import entry

# Values only the datamodule knows (each datamodule's `model_arguments`), handed to the model when both are built.
# A link whose target the chosen model lacks is skipped, so one list serves every example.
DATA_TO_MODEL_LINKS = model_arguments()

# The trainer's defaults, below what a config or a flag sets. A "callbacks" list here runs beside the callbacks that
# make every run resumable, which are always added.
TRAINER_DEFAULTS = {
    "default_root_dir": "logs",  # whatever a run writes, also without a logger (fast_dev_run) or checkpoint directory
}


def run(args: list[str] | None = None) -> None:
    """Parse `args` (default: the command line) and run the subcommand: what every process of a job runs. Launchers
    call it on each process they start, some by reference (`cli:run`)."""
    entry.run(args, job=run, data_to_model_links=DATA_TO_MODEL_LINKS, trainer_defaults=TRAINER_DEFAULTS)


def main(args: list[str] | None = None) -> None:
    """`run` as the whole process, ending with the status launchers act on (trainrig/errors/exit_status.py)."""
    entry.main(run, args)


if __name__ == "__main__":
    main()
