"""Train, validate, test or predict with any example: `python cli.py fit --config configs/EXAMPLE.yaml`.

Every run, on a laptop or a cluster, goes through this LightningCLI; strategies and
launchers only change how many processes run it and where. The machinery lives in `trainrig/`;
optional parts add their options, or run the job elsewhere, through their plugin (trainrig/registry.py).
"""

import gc
import importlib
import inspect
import logging
import signal
import sys
import warnings
from pathlib import Path

import yaml
from lightning.pytorch.cli import LightningCLI
from lightning.pytorch.plugins.io import TorchCheckpointIO
from lightning.pytorch.utilities.exceptions import MisconfigurationException

from datamodules import model_arguments
from trainrig.errors import UserInputError, find_user_error, lost_peer, one_line
from trainrig.errors.held_output import ReleasedAtSetup, held_output, on_release
from trainrig.errors.moved import class_paths, moved_path_error
from trainrig.errors.options import ShortErrorParser
from trainrig.loggers.model_summary import without_empty_flops
from trainrig.loggers.run_config import SaveConfigToLoggers
from trainrig.network import RanksCannotConnect, rendezvous_network
from trainrig.registry import hooks
from trainrig.resume.atomic_io import AtomicCheckpointIO
from trainrig.resume.epoch_metrics import EpochMetrics
from trainrig.resume.latest import check_checkpoint_exists, check_fits, continue_metrics, resolve_last
from trainrig.resume.moved_checkpoints import MovedCheckpoints
from trainrig.resume.random_state import RandomState
from trainrig.resume.readable import check_checkpoint_readable, check_same_parameters
from trainrig.resume.replaced_settings import ReplacedSettings
from trainrig.resume.torchrun_restarts import separate_restart_attempts
from trainrig.strategies.flag import flag_values, strategy_class, with_class_paths  # registers the package's strategies
from trainrig.strategies.record import ParallelismRecord

LOST_PEER_EXIT_CODE = 128 + signal.SIGABRT

# Values only the datamodule knows (each datamodule's `model_arguments`), handed to the model when both are built.
# A link whose target the chosen model lacks is skipped, so one list serves every example.
DATA_TO_MODEL_LINKS = model_arguments()


class TemplateCLI(LightningCLI):
    def __init__(self, **kwargs) -> None:
        self.resume_point = None  # the run and checkpoint `--ckpt_path last` continues
        settings = dict(
            subclass_mode_model=True,
            subclass_mode_data=True,
            parser_class=ShortErrorParser,
            auto_configure_optimizers=False,
            save_config_callback=SaveConfigToLoggers,
            save_config_kwargs={"overwrite": False},
            # Whatever a run writes goes under logs/, also without a logger (fast_dev_run) or checkpoint directory.
            # Every run carries what makes a resumed run continue bit for bit: random state, epoch aggregates, and
            # checkpoint trackers that follow a run resumed in another folder; a resumed run says which settings
            # of its config the checkpoint's optimizer and scheduler state replaces; and every checkpoint records the
            # parallelism that really ran.
            trainer_defaults={
                "default_root_dir": "logs",
                "callbacks": [
                    RandomState(),
                    EpochMetrics(),
                    MovedCheckpoints(),
                    ReplacedSettings(),
                    ReleasedAtSetup(),
                    ParallelismRecord(),
                ],
            },
        )
        super().__init__(**{**settings, **kwargs})

    def add_arguments_to_parser(self, parser) -> None:
        for name in DATA_TO_MODEL_LINKS:
            parser.link_arguments(f"data.{name}", f"model.init_args.{name}", apply_on="instantiate")
        for add_arguments in hooks("add_arguments"):
            add_arguments(parser)

    def parse_arguments(self, parser, args) -> None:
        if args is not None and not isinstance(args, list):
            super().parse_arguments(parser, args)
            return
        args = sys.argv[1:] if args is None else args
        check_config_files_parse(args)
        self.config = parser.parse_args(with_class_paths(args))
        check_no_moved_class_path(self.config)
        if (subcommand := self.config.get("subcommand")) is not None:
            check_strategy_name(self.config[subcommand].trainer.get("strategy"))
            check_model_arguments_are_linked(self.config[subcommand].data)
            # Before LightningCLI reads the checkpoint's hyper-parameters, and before `last` is resolved.
            check_checkpoint_exists(self.config[subcommand].get("ckpt_path"))
            check_checkpoint_readable(self.config[subcommand].get("ckpt_path"))

    def before_instantiate_classes(self) -> None:
        if self.subcommand is None:
            return
        config = self.config[self.subcommand]
        if self.subcommand == "fit":
            # Where the experiment's checkpoints are, when not in its run folders.
            roots = [root for checkpoint_root in hooks("checkpoint_root") if (root := checkpoint_root(config))]
            self.resume_point = resolve_last(config, roots[0] if roots else None)
        if self.subcommand == "predict" and config.ckpt_path is None:
            raise UserInputError(
                "predict needs a trained model: set --ckpt_path to a checkpoint that `cli.py fit` saved "
                "(untrained weights predict noise)"
            )

    def after_instantiate_classes(self) -> None:
        """Lightning records a link's value among the model's hyperparameters also when the model has no such
        argument; resuming its checkpoint would then pass it to the model's __init__."""
        model = getattr(self, "model", None)
        if model is None:
            return
        accepted = inspect.signature(type(model).__init__).parameters
        for name in DATA_TO_MODEL_LINKS:
            if name not in accepted:
                model.hparams.pop(name, None)

    # The checkpoint is checked against the model before the trainer runs; what the run printed so far (Lightning's
    # start-up lines, the checkpoint `--ckpt_path last` found) goes out once the trainer sets the run up.
    def before_fit(self) -> None:
        check_checkpoint_fits(self.model, self.config.fit.ckpt_path)
        point = self.resume_point
        on_release(lambda: continue_metrics(point))  # a refused resume leaves the run's metrics as they were

    def before_validate(self) -> None:
        check_checkpoint_fits(self.model, self.config.validate.ckpt_path)

    def before_test(self) -> None:
        check_checkpoint_fits(self.model, self.config.test.ckpt_path)

    def before_predict(self) -> None:
        check_checkpoint_fits(self.model, self.config.predict.ckpt_path)

    def instantiate_trainer(self, **kwargs):
        """Every run writes checkpoints atomically, unless the config chose its own CheckpointIO plugin."""
        try:
            trainer = super().instantiate_trainer(**kwargs)
        except (ValueError, TypeError, MisconfigurationException) as error:  # Lightning rejects a setting
            raise UserInputError(f"invalid trainer settings: {one_line(error)}") from error
        if type(trainer.strategy.checkpoint_io) is TorchCheckpointIO:
            trainer.strategy.checkpoint_io = AtomicCheckpointIO()
        trainer.callbacks = without_empty_flops(trainer.callbacks)
        return trainer

    def instantiate_classes(self) -> None:
        """An optional part may run the job elsewhere (on a cluster's workers); then nothing is left to run here."""
        if any(run_elsewhere(self, run) for run_elsewhere in hooks("run_elsewhere")):
            self.subcommand = None
            return
        super().instantiate_classes()


def check_model_arguments_are_linked(data) -> None:
    """A datamodule outside datamodules/ may list `model_arguments`, but no link was made for them: say so, rather
    than train a model that silently kept its own default."""
    if data is None or not isinstance(data.get("class_path"), str):
        return
    module, _, name = data.class_path.rpartition(".")
    data_class = getattr(importlib.import_module(module), name)  # the parser imported it already
    unlinked = [name for name in getattr(data_class, "model_arguments", ()) if name not in DATA_TO_MODEL_LINKS]
    if unlinked:
        raise UserInputError(
            f"{data.class_path}.model_arguments lists {', '.join(unlinked)}, but cli.py links model arguments only "
            "for the datamodules in datamodules/: move the class there"
        )


def check_checkpoint_fits(model, ckpt_path: str | None) -> None:
    """The checkpoint's parameters, by name and shape, are the model's: else one line before the trainer runs."""
    check_fits(model, ckpt_path)
    check_same_parameters(model, ckpt_path)


def check_config_files_parse(args: list[str]) -> None:
    """A `--config` file whose YAML does not parse is named, with yaml's problem and line; jsonargparse's own error
    names neither the file nor the option."""
    for path in flag_values(args, "--config")[0]:
        if not Path(path).is_file():
            continue  # the parser says that it does not exist
        try:
            yaml.safe_load(Path(path).read_text())
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            problem = getattr(error, "problem", None) or one_line(error)
            raise UserInputError(f"--config {path} is not valid YAML: {problem}{where}") from error


def check_strategy_name(value) -> None:
    """A `--trainer.strategy` name that no strategy is registered under, refused with the names that are: Lightning's
    own error lists only some of its own."""
    from lightning.pytorch.strategies import StrategyRegistry

    if not isinstance(value, str) or value == "auto" or strategy_class(value) is not None:
        return
    if "." in value:
        raise UserInputError(f"--trainer.strategy {value}: no Strategy class at that import path")
    raise UserInputError(
        f"--trainer.strategy {value!r} is not a registered strategy; choose one of: auto, "
        f"{', '.join(sorted(StrategyRegistry))}, or a Strategy class path"
    )


def check_no_moved_class_path(config) -> None:
    """A config written before the machinery moved into trainrig/ fails with the new path, not an import error."""
    for path in class_paths(config.as_dict()):
        if (problem := moved_path_error(path)) is not None:
            raise UserInputError(problem)


def run(args: list[str] | None = None) -> None:
    """Parse `args` and run the subcommand, letting errors propagate (a launcher's worker sends them to its client)."""
    silence_library_noise()
    try:
        with rendezvous_network():
            TemplateCLI(args=args)
    finally:
        release_job_resources()


def silence_library_noise() -> None:
    """Leave out what no user of this project can act on: Lightning's tip for a product the project does not use,
    and torch's deprecation of a class Lightning's own code still uses. Every other warning still shows."""
    warnings.filterwarnings(
        "ignore",
        message=r"`isinstance\(treespec, LeafSpec\)` is deprecated",
        category=FutureWarning,
        module=r"lightning\.pytorch\.utilities\._pytree",
    )
    logging.getLogger("lightning.pytorch.utilities.rank_zero").addFilter(not_a_litlogger_tip)


def not_a_litlogger_tip(record: logging.LogRecord) -> bool:
    return "try installing [litlogger]" not in record.getMessage()


def release_job_resources() -> None:
    """Close what the job opened before the process, or the next job in the same process, goes on."""
    for release in hooks("release"):
        release()
    # Left to exit handlers, gloo's threads can abort the process after a successful run
    # ("terminate called without an active exception"), and a process that runs another job
    # (a launcher's worker) must not find this one's process group. The job's objects (trainer,
    # strategy, pipeline stages) hold groups in reference cycles: collected first, each group is
    # freed here, its threads joined, rather than during the interpreter's shutdown.
    distributed = sys.modules.get("torch.distributed")
    if distributed is not None and distributed.is_available() and distributed.is_initialized():
        gc.collect()
        distributed.destroy_process_group()
        gc.collect()


def main(args: list[str] | None = None) -> None:
    """Exit statuses: 0 done; 2 bad input (never worth a retry); 143 stopped by SIGTERM/SIGINT with a checkpoint;
    134 another process of the job was lost; 1 anything else. 128 and above: a restart resumes (`--ckpt_path last`).
    """
    try:
        separate_restart_attempts()
        with held_output():
            run(args)
    except Exception as error:
        if (user_error := find_user_error(error)) is not None:
            print(f"error: {one_line(user_error)}", file=sys.stderr)
            sys.exit(2)
        if isinstance(error, RanksCannotConnect):
            print(f"error: {error}; exiting {LOST_PEER_EXIT_CODE}, a restart retries", file=sys.stderr)
            sys.exit(LOST_PEER_EXIT_CODE)
        if (peer_error := lost_peer(error)) is not None:
            # Retryable by a launcher or a cluster's restart policy, like NCCL's own abort on a collective timeout.
            print(
                f"error: lost another process of the job ({type(peer_error).__name__}: {one_line(peer_error)}); "
                f"exiting {LOST_PEER_EXIT_CODE}, a restart resumes",
                file=sys.stderr,
            )
            sys.exit(LOST_PEER_EXIT_CODE)
        raise


if __name__ == "__main__":
    main()
