"""Train, validate, test or predict with any example: `python cli.py fit --config configs/EXAMPLE.yaml`.

Every run, on a laptop or a cluster, goes through this LightningCLI; strategies and
launchers only change how many processes run it and where.
"""

import signal
import sys

import yaml  # cookiecutter: only with dask
from lightning.pytorch.cli import LightningCLI
from lightning.pytorch.plugins.io import TorchCheckpointIO
from lightning.pytorch.utilities.exceptions import MisconfigurationException

import strategies  # noqa: F401 (registers strategies by name)  # cookiecutter: only with mlp
from callbacks.config_to_loggers import SaveConfigToLoggers
from errors import UserInputError, find_user_error, lost_peer, one_line
from errors.options import ShortErrorParser
from launchers import DaskOptions, dask_requested  # cookiecutter: only with dask
from resume.atomic_io import AtomicCheckpointIO
from resume.latest import check_fits, resolve_last
from resume.random_state import RandomState
from resume.torchrun_restarts import separate_restart_attempts

LOST_PEER_EXIT_CODE = 128 + signal.SIGABRT

# Values only the datamodule knows, handed to the model when both are built. A link whose
# target the chosen model lacks is skipped, so one list serves every example.
DATA_TO_MODEL_LINKS = (
    "num_classes",  # cookiecutter: only with cnn or mlp
    "input_size",  # cookiecutter: only with mlp
    "vocab",  # cookiecutter: only with lstm
    "context_length",  # cookiecutter: only with lstm
    "formulation",  # cookiecutter: only with lstm
)


class TemplateCLI(LightningCLI):
    def __init__(self, **kwargs) -> None:
        settings = dict(
            subclass_mode_model=True,
            subclass_mode_data=True,
            parser_class=ShortErrorParser,
            auto_configure_optimizers=False,
            save_config_callback=SaveConfigToLoggers,
            save_config_kwargs={"overwrite": False},
            # Whatever a run writes goes under logs/, also without a logger (fast_dev_run) or checkpoint directory.
            # RandomState belongs to every run: it is part of what makes a resumed run continue bit for bit.
            trainer_defaults={"default_root_dir": "logs", "callbacks": [RandomState()]},
        )
        super().__init__(**{**settings, **kwargs})

    def add_arguments_to_parser(self, parser) -> None:
        for name in DATA_TO_MODEL_LINKS:
            parser.link_arguments(f"data.{name}", f"model.init_args.{name}", apply_on="instantiate")
        parser.add_class_arguments(DaskOptions, "dask")  # cookiecutter: only with dask

    def before_instantiate_classes(self) -> None:
        if self.subcommand != "fit":
            return
        config = self.config.fit
        # cookiecutter: only with dask
        if dask_requested(config.dask) and config.dask.resume and config.ckpt_path is None:
            config.ckpt_path = "last"  # a launcher's job continues where its last attempt stopped
        # cookiecutter: end
        resolve_last(config)

    def before_fit(self) -> None:
        check_fits(self.model, self.config.fit.ckpt_path)

    def instantiate_trainer(self, **kwargs):
        """Every run writes checkpoints atomically, unless the config chose its own CheckpointIO plugin."""
        try:
            trainer = super().instantiate_trainer(**kwargs)
        except (ValueError, MisconfigurationException) as error:  # Lightning's words for a setting it rejects
            raise UserInputError(f"invalid trainer settings: {one_line(error)}") from error
        if type(trainer.strategy.checkpoint_io) is TorchCheckpointIO:
            trainer.strategy.checkpoint_io = AtomicCheckpointIO()
        return trainer

    # cookiecutter: only with dask

    def instantiate_classes(self) -> None:
        """With `--dask.*` set, the Dask workers build and run everything; this process only launches them.

        Without a subcommand (`run=False`, as the benchmarks build a trainer) there is nothing to launch.
        """
        if self.subcommand is None or not dask_requested(self.config[self.subcommand].dask):
            super().instantiate_classes()
            return
        from launchers.dask_launcher import launch

        resolved = yaml.safe_load(self.parser.dump(self.config, skip_unset=False))[self.subcommand]
        launch(run, self.subcommand, resolved)
        self.subcommand = None  # it ran on the workers: nothing is left to run here

    # cookiecutter: end


def run(args: list[str] | None = None) -> None:
    """Parse `args` and run the subcommand, letting errors propagate (a launcher's worker sends them to its client)."""
    try:
        TemplateCLI(args=args)
    finally:
        release_job_resources()


def release_job_resources() -> None:
    """Close what the job opened before the process, or the next job in the same process, goes on."""
    # cookiecutter: only with wandb
    # Left to exit handlers, a DDP run's W&B file can miss its last records.
    wandb = sys.modules.get("wandb")
    if wandb is not None and wandb.run is not None:
        wandb.finish()
    # cookiecutter: end
    # Left to exit handlers, gloo's threads can abort the process after a successful run
    # ("terminate called without an active exception"), and a process that runs another job
    # (a launcher's worker) must not find this one's process group.
    distributed = sys.modules.get("torch.distributed")
    if distributed is not None and distributed.is_available() and distributed.is_initialized():
        distributed.destroy_process_group()


def main(args: list[str] | None = None) -> None:
    """Exit statuses: 0 done; 2 bad input (never worth a retry); 143 stopped by SIGTERM/SIGINT with a checkpoint;
    134 another process of the job was lost; 1 anything else. 128 and above: a restart resumes (`--ckpt_path last`).
    """
    separate_restart_attempts()
    try:
        run(args)
    except Exception as error:
        if (user_error := find_user_error(error)) is not None:
            print(f"error: {one_line(user_error)}", file=sys.stderr)
            sys.exit(2)
        if (peer_error := lost_peer(error)) is not None:
            # cookiecutter: only with kubernetes
            # Retryable under a PyTorchJob `ExitCode` policy, like NCCL's own abort on a collective timeout (SIGABRT).
            # cookiecutter: end
            print(
                f"error: lost another process of the job ({type(peer_error).__name__}: {one_line(peer_error)}); "
                f"exiting {LOST_PEER_EXIT_CODE}, a restart resumes",
                file=sys.stderr,
            )
            sys.exit(LOST_PEER_EXIT_CODE)
        raise


if __name__ == "__main__":
    main()
