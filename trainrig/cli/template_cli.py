"""The LightningCLI every run goes through, on a laptop or a cluster: strategies and launchers only change how many
processes run it and where. Optional parts add their options, or run the job elsewhere, through their plugin
(trainrig/registry.py).

What the user chooses (which values the data hands the model, the trainer's defaults, the job launchers run on every
process) comes from `cli.py` as arguments; what makes every run resumable, checked and quiet is added here.
"""

import inspect
import sys
from collections.abc import Callable, Collection
from contextlib import ExitStack

from lightning.pytorch.cli import LightningCLI
from lightning.pytorch.plugins.io import TorchCheckpointIO
from lightning.pytorch.utilities.exceptions import MisconfigurationException
from typing_extensions import override

from trainrig.cli.checks import (
    check_checkpoint_fits,
    check_config_files_parse,
    check_model_arguments_are_linked,
    check_model_can_predict,
    check_no_moved_class_path,
    check_strategy_name,
)
from trainrig.errors import UserInputError, one_line
from trainrig.errors.held_output import ReleasedAtSetup, on_release
from trainrig.errors.options import ShortErrorParser
from trainrig.errors.user_code import building_error, raised_while_building
from trainrig.loggers.model_summary import without_empty_flops
from trainrig.loggers.run_config import SaveConfigToLoggers
from trainrig.monitoring.hook_profiler import without_profiling_cost
from trainrig.monitoring.idle_hooks import skip_idle_batch_hooks
from trainrig.monitoring.progress_bar import with_log_step_progress_bar
from trainrig.monitoring.throughput import with_throughput
from trainrig.registry import hooks
from trainrig.resume.abandoned_future import AbandonedFuture
from trainrig.resume.atomic_io import AtomicCheckpointIO
from trainrig.resume.data_order import LoaderPositionRestore, ResumableTrainingLoader
from trainrig.resume.epoch_metrics import EpochMetrics
from trainrig.resume.latest import check_checkpoint_exists, continue_metrics, resolve_last
from trainrig.resume.moved_checkpoints import MovedCheckpoints
from trainrig.resume.preemption import skip_lightning_stop_broadcast_while_handled_here
from trainrig.resume.random_state import RandomState
from trainrig.resume.readable import check_checkpoint_readable, trusted_classes
from trainrig.resume.replaced_settings import ReplacedSettings
from trainrig.strategies.record import ParallelismRecord
from trainrig.strategies.strategy_option import with_class_paths  # registers the package's strategies

__all__ = ["TemplateCLI"]


class TemplateCLI(LightningCLI):
    @override
    def __init__(
        self,
        *,
        job: Callable[[list[str] | None], None],
        data_to_model_links: Collection[str],
        trainer_defaults: dict,
        **kwargs,
    ) -> None:
        """`job`: what a launcher runs on every process it starts (cli.py's `run`, sent by reference);
        `data_to_model_links`: the datamodule's attributes handed to the model's arguments of the same names;
        `trainer_defaults`: the user's, to which every run's own callbacks are added."""
        self.job = job
        self.data_to_model_links = data_to_model_links
        self.resume_point = None  # the run and checkpoint `--ckpt_path last` continues
        # Every run carries what makes a resumed run continue bit for bit: random state, epoch aggregates, and
        # checkpoint trackers that follow a run resumed in another folder, checkpoint files that the stopped run saved
        # after the checkpoint it continues from removed; a resumed run says which settings of its config the
        # checkpoint's optimizer and scheduler state replaces; and every checkpoint records the parallelism that
        # really ran.
        own_callbacks = [
            RandomState(),
            EpochMetrics(),
            MovedCheckpoints(),
            AbandonedFuture(),
            ReplacedSettings(),
            ReleasedAtSetup(),
            ParallelismRecord(),
            LoaderPositionRestore(),
            ResumableTrainingLoader(),
        ]
        callbacks = [*own_callbacks, *trainer_defaults.get("callbacks", [])]
        settings = dict(
            subclass_mode_model=True,
            subclass_mode_data=True,
            parser_class=ShortErrorParser,
            auto_configure_optimizers=False,
            save_config_callback=SaveConfigToLoggers,
            save_config_kwargs={"overwrite": False},
            trainer_defaults={**trainer_defaults, "callbacks": callbacks},
        )
        # What `--weights_only false` allows of the checkpoint it trusts, for as long as the CLI runs.
        self.checkpoint_trust = ExitStack()
        with self.checkpoint_trust:
            super().__init__(**{**settings, **kwargs})

    @override
    def add_arguments_to_parser(self, parser) -> None:
        for name in self.data_to_model_links:
            parser.link_arguments(f"data.{name}", f"model.init_args.{name}", apply_on="instantiate")
        for add_arguments in hooks("add_arguments"):
            add_arguments(parser)

    @override
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
            check_model_arguments_are_linked(self.config[subcommand].data, self.data_to_model_links)
            if subcommand == "predict":
                check_model_can_predict(self.config[subcommand].model)
            config = self.config[subcommand]
            # Every checkpoint is loaded with `weights_only=True`, given to Lightning explicitly: left unset (null),
            # Lightning unpickles a URL's checkpoint in full, and torch < 2.6 every file. `--weights_only false` trusts
            # the one checkpoint.
            if config.weights_only is None:
                config.weights_only = True
            # Before LightningCLI reads the checkpoint's hyper-parameters, and before `last` is resolved.
            check_checkpoint_exists(config.get("ckpt_path"))
            check_checkpoint_readable(config.get("ckpt_path"), config.weights_only)
            self.checkpoint_trust.enter_context(trusted_classes(config.get("ckpt_path"), config.weights_only))

    @override
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

    @override
    def instantiate_classes(self) -> None:
        """An optional part may run the job elsewhere (on a cluster's workers); then nothing is left to run here. A
        class whose own code raises while it is built is named with that error (trainrig/errors/user_code.py)."""
        if any(run_elsewhere(self, self.job) for run_elsewhere in hooks("run_elsewhere")):
            self.subcommand = None
            return
        try:
            super().instantiate_classes()
        except Exception as error:
            if (cause := raised_while_building(error)) is None:
                raise
            raise building_error(error, cause) from cause

    @override
    def after_instantiate_classes(self) -> None:
        """Lightning records a link's value among the model's hyperparameters also when the model has no such
        argument; resuming its checkpoint would then pass it to the model's __init__."""
        model = getattr(self, "model", None)
        if model is None:
            return
        accepted = inspect.signature(type(model).__init__).parameters
        for name in self.data_to_model_links:
            if name not in accepted:
                model.hparams.pop(name, None)

    @override
    def instantiate_trainer(self, **kwargs):
        """Every run writes checkpoints atomically, unless the config chose its own CheckpointIO plugin, shows the
        template's progress bar, unless the config chose its own, and logs its throughput; no step waits on Lightning's
        broadcast of a stop the template handles itself, nor pays for the default profiler, which records nothing, nor
        for Lightning's calls of the callbacks' per-batch hooks that do nothing."""
        try:
            trainer = super().instantiate_trainer(**kwargs)
        except (ValueError, TypeError, MisconfigurationException) as error:  # Lightning rejects a setting
            raise UserInputError(f"invalid trainer settings: {one_line(error)}") from error
        if type(trainer.strategy.checkpoint_io) is TorchCheckpointIO:
            trainer.strategy.checkpoint_io = AtomicCheckpointIO()
        trainer.callbacks = without_empty_flops(trainer.callbacks)
        # Lightning's default progress bar reads the logged values on the host at every step; the template's reads
        # them at log steps only, as does the throughput every run logs.
        trainer.callbacks = with_throughput(with_log_step_progress_bar(trainer.callbacks))
        without_profiling_cost(trainer)
        skip_idle_batch_hooks(trainer.callbacks)
        skip_lightning_stop_broadcast_while_handled_here(trainer)
        return trainer

    # LightningCLI calls `before_<subcommand>` once the model and the trainer are built: the checkpoint is checked
    # against the model before the trainer runs; what the run printed so far (Lightning's start-up lines, the
    # checkpoint `--ckpt_path last` found) goes out once the trainer sets the run up.
    def before_subcommand(self) -> None:
        config = self.config[self.subcommand]
        check_checkpoint_fits(self.model, config.ckpt_path, config.weights_only)
        # A datamodule that keeps its own position in the checkpoint (streamed shards) checks it before anything is
        # written: the trainer learns the checkpoint only after the run's folder exists.
        check_data_position = getattr(self.datamodule, "check_checkpoint", None)
        if check_data_position is not None:
            check_data_position(config.ckpt_path)

    before_validate = before_test = before_predict = before_subcommand

    def before_fit(self) -> None:
        self.before_subcommand()
        point = self.resume_point
        on_release(lambda: continue_metrics(point))  # a refused resume leaves the run's metrics as they were
