"""What a Dask run is: one frozen `RunDescription`, made once on the client from the parsed config, that the client's
modules and every rank read instead of the config's sections.

This is the one module that knows the config's keys. The client checks the config and names the logger's run (so
that every attempt continues it) while building the description, from new dicts: the parsed config it was given stays
as it was, and the description's own config is read-only (mappings as MappingProxyType, lists as tuples). An attempt
is a new description (`dataclasses.replace`) carrying its `Attempt`; a rank turns it into the plain config its cli.py
runs with `RunDescription.rank_config`, a copy of its own. No Dask here: the client and the workers both import it.
"""

import logging
import multiprocessing
import sys
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from types import MappingProxyType

from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.strategies import DDPStrategy, ModelParallelStrategy

from trainrig.dask import DaskOptions
from trainrig.errors import UserInputError
from trainrig.launch.strategy import Placement, pipeline_hint, placement
from trainrig.registry import import_object, logger_extension
from trainrig.resume.run_directory import RUN_FOLDERS, logger_class, next_version, run_folder
from trainrig.resume.run_directory import output_root as client_output_root
from trainrig.strategies.strategy_option import with_launcher_timeout

log = logging.getLogger("trainrig.dask")

# How long the rendezvous and every collective wait for the other ranks when the strategy sets no timeout of its
# own (--trainer.strategy.init_args.timeout): a lost rank fails the run in minutes, not torch's 30.
RANK_TIMEOUT = timedelta(minutes=10)


@dataclass(frozen=True)
class Attempt:
    """One start of every rank; a restart is a new attempt, with the workers and the checkpoint it has."""

    number: int  # 0 for the first start, one more for each restart
    world_size: int
    main_address: str  # the host of rank 0's worker, where the ranks meet
    main_port: int
    topic: str  # the Dask event topic rank 0's epoch metrics go to; it names the attempt's tasks and other events
    checkpoint_queue: str  # the Dask queue rank 0 sends the client its files through
    ckpt_path: str | None = None  # the checkpoint in --dask.checkpoint_dir to resume from, which the ranks read there

    @property
    def stop_event(self) -> str:
        """The Dask event the client sets to have every rank checkpoint and stop."""
        return f"{self.topic}-stop"

    @property
    def first_step_event(self) -> str:
        return first_step_event(self.topic)


def first_step_event(topic: str) -> str:
    """The Dask event rank 0 sets after the attempt's first training step."""
    return f"{topic}-first-step"


@dataclass(frozen=True)
class RunDescription:
    """A Dask run as the client launches it and every rank runs it (see the module's docstring)."""

    job: str  # `module:function` that each rank calls with cli.py's arguments (see job_reference)
    subcommand: str
    # The config the ranks run, read-only: the client's, with its logger's run named and its checkpoints in
    # `shared_dir` when there is one, without the dask section (a rank launches nothing).
    config: Mapping
    strategy: Mapping  # the trainer.strategy entry every rank runs: {class_path, init_args}
    options: DaskOptions  # how the client launches the run; the ranks do not read them
    output_root: Path  # where the run's files go on the client's machine; rank 0 sends paths relative to it
    shared_dir: Path | None  # the run's checkpoints in --dask.checkpoint_dir, which every rank reads; else None
    attempt: Attempt | None = None  # set for each attempt, before its ranks start

    def __post_init__(self) -> None:
        object.__setattr__(self, "config", frozen(self.config))
        object.__setattr__(self, "strategy", frozen(self.strategy))

    def __getstate__(self) -> dict:
        """Pickled (to the workers) as plain data, since a read-only view does not pickle; read-only again after."""
        return {**vars(self), "config": thawed(self.config), "strategy": thawed(self.strategy)}

    def __setstate__(self, state: dict) -> None:
        vars(self).update(state)
        self.__post_init__()

    @property
    def ckpt_path(self) -> str | None:
        """The --ckpt_path the run starts from, as the client's config names it."""
        return self.config.get("ckpt_path")

    def rank_config(
        self, output_root: Path, plugins: list[dict], callbacks: list[dict], checkpoint_file: Path | None
    ) -> dict:
        """The config one rank of the attempt runs, as plain data of its own: one DDP process per node, with the
        rank's `plugins` and `callbacks` added; every output under `output_root`, the rank's own directory; resumed
        from `checkpoint_file` (the client's checkpoint, written there), else from the attempt's shared checkpoint; in
        a daemonic worker, loading data in the rank's own process."""
        config = thawed(self.config)
        trainer = config["trainer"]
        trainer.update(strategy=thawed(self.strategy), devices=1, num_nodes=self.attempt.world_size)
        trainer["plugins"] = [*as_list(trainer.get("plugins")), *plugins]
        trainer["callbacks"] = [*as_list(trainer.get("callbacks")), *callbacks]
        ckpt_path = str(checkpoint_file) if checkpoint_file is not None else self.attempt.ckpt_path
        if ckpt_path is not None:
            config["ckpt_path"] = ckpt_path
        trainer["default_root_dir"] = str(output_root)
        for logger in as_list(trainer.get("logger")):
            if isinstance(logger, dict) and "save_dir" in (logger.get("init_args") or {}):
                logger["init_args"]["save_dir"] = str(output_root)
        if multiprocessing.current_process().daemon:
            load_data_in_process(config)
        return config


def describe_run(job: Callable[[list[str]], None], subcommand: str, resolved: Mapping) -> RunDescription:
    """The run that `resolved` (the subcommand's whole parsed config as plain data, as `--print_config` shows it)
    describes, its input checked before any cluster starts; `resolved` itself stays as it is.

    Args:
        job: the entry point each rank runs (cli.py's `run`), sent to the workers by reference.
    """
    options = DaskOptions(**resolved["dask"])
    check_options(options)
    output_root = client_output_root(resolved["trainer"])
    trainer, named = with_named_runs(resolved["trainer"], output_root)
    for line in named:
        log.info(f"dask: {line}")
    strategy = rank_strategy(trainer.get("strategy", "auto"))
    check_one_device_per_rank(trainer)
    shared_dir = None
    if options.checkpoint_dir is not None:
        # The run's checkpoints in the shared directory, in the run's own folder: another run never overwrites them.
        shared_dir = Path(options.checkpoint_dir) / run_folder(trainer) / "checkpoints"
        trainer = with_checkpoints_in(trainer, shared_dir)
    elif writes_sharded_checkpoints(strategy):
        raise UserInputError(
            "every rank writes its part of an fsdp2 checkpoint, which rank 0 cannot send to this client: give "
            "--dask.checkpoint_dir, a directory every worker and this client can read"
        )
    config = {**{key: value for key, value in resolved.items() if key != "dask"}, "trainer": trainer}
    return RunDescription(job_reference(job), subcommand, config, strategy, options, output_root, shared_dir)


def check_options(options: DaskOptions) -> None:
    for name in ("n_workers", "min_workers"):
        if getattr(options, name) is not None and getattr(options, name) < 1:
            raise UserInputError(f"--dask.{name} must be at least 1, got {getattr(options, name)}")
    if options.max_restarts is not None and options.max_restarts < 0:
        raise UserInputError(f"--dask.max_restarts must be 0 or more, got {options.max_restarts}")
    if options.replacement_timeout <= 0:
        raise UserInputError(f"--dask.replacement_timeout must be more than 0 s, got {options.replacement_timeout}")
    for name in ("min_workers", "workers"):
        if getattr(options, name) is not None and options.address is None:
            raise UserInputError(f"--dask.{name} applies to an existing cluster (--dask.address)")
    if options.workers is not None:
        if not options.workers or len(set(options.workers)) != len(options.workers):
            raise UserInputError(f"--dask.workers must name distinct workers, got {options.workers}")
        if options.n_workers is not None and options.n_workers != len(options.workers):
            raise UserInputError(
                f"--dask.n_workers {options.n_workers} disagrees with the {len(options.workers)} --dask.workers"
            )


def with_named_runs(trainer: Mapping, output_root: Path) -> tuple[dict, list[str]]:
    """A copy of `trainer` whose loggers name their runs before the ranks start, so that the checkpoints they send land
    in the right place and every restart of the job continues the same run; and a line for each run a plugin named.

    A logger's plugin names its run (`pin_run`); the first logger, with numbered run folders, gets the next free
    version unless it has one (`--ckpt_path last` sets the version it continues).
    """
    named: list[str] = []

    def with_run_named(logger, first: bool):
        if not isinstance(logger, dict):
            return logger
        init_args = dict(logger.get("init_args") or {})
        pin_run = getattr(logger_extension(logger_class(logger)), "pin_run", None)
        if pin_run is not None and (line := pin_run(init_args)):  # it names the run in this copy
            named.append(line)
        run_argument = RUN_FOLDERS.get(logger_class(logger), (None,))[-1]
        if first and run_argument == "version" and init_args.get("version") is None:
            init_args["version"] = next_version(output_root / (init_args.get("name") or "lightning_logs"))
        return {**logger, "init_args": init_args}

    loggers = trainer.get("logger")
    if isinstance(loggers, list):
        loggers = [with_run_named(logger, first=index == 0) for index, logger in enumerate(loggers)]
    else:
        loggers = with_run_named(loggers, first=True)
    return {**trainer, "logger": loggers}, named


def with_checkpoints_in(trainer: Mapping, shared_dir: Path) -> dict:
    """A copy of `trainer` whose ModelCheckpoints write to `shared_dir`."""
    callbacks = [
        {**callback, "init_args": {**(callback.get("init_args") or {}), "dirpath": str(shared_dir)}}
        if isinstance(callback, dict) and issubclass(import_object(callback["class_path"]), ModelCheckpoint)
        else callback
        for callback in as_list(trainer.get("callbacks"))
    ]
    return {**trainer, "callbacks": callbacks}


def rank_strategy(strategy) -> dict:
    """The trainer.strategy entry every rank runs: the chosen strategy of a process per device (DDP for `auto`), with
    the launcher's timeout unless the strategy has its own."""
    if strategy != "auto" and placement(strategy) in (None, Placement.ONE_PROCESS):
        raise UserInputError(
            f"the Dask launcher runs one DDP process per worker; --trainer.strategy {strategy} is not "
            f"DDP-based (use ddp or fsdp2{pipeline_hint('the workers')})"
        )
    entry = with_launcher_timeout(strategy, DDPStrategy, RANK_TIMEOUT)
    strategy_class = import_object(entry["class_path"])
    # Dask started the processes: a spawn or fork start method would make Lightning start more.
    entry["init_args"].pop("start_method", None)
    if "timeout" not in entry["init_args"]:
        log.warning(f"dask: {strategy_class.__name__} takes no timeout, so a lost rank can leave the others waiting")
    return entry


def writes_sharded_checkpoints(entry: dict) -> bool:
    return issubclass(import_object(entry["class_path"]), ModelParallelStrategy) and entry["init_args"].get(
        "sharded_checkpoint", True
    )


def check_one_device_per_rank(trainer: Mapping) -> None:
    """Each Dask worker runs one rank on one device; more devices or nodes would contradict the worker count."""
    if str(trainer.get("devices", "auto")) not in ("auto", "1") or trainer.get("num_nodes", 1) != 1:
        raise UserInputError(
            "with --dask.* every worker runs one rank on one device: set --trainer.devices 1 and --trainer.num_nodes 1 "
            "(or leave them unset) and choose the number of ranks with --dask.n_workers"
        )


def load_data_in_process(config: dict) -> None:
    """A daemonic Dask worker may not start DataLoader worker processes: load batches in the rank's own process."""
    data_args = (config.get("data") or {}).get("init_args") or {}
    if data_args.get("num_workers"):
        warnings.warn(
            "this Dask worker is a daemonic process and cannot start DataLoader workers: loading data with "
            "num_workers=0 "
            f"instead of {data_args['num_workers']} (start the workers with "
            "DASK_DISTRIBUTED__WORKER__DAEMON=False to keep them)",
            stacklevel=2,
        )
        data_args["num_workers"] = 0


def job_reference(job: Callable) -> str:
    """`module:function`, importable on a worker; a job defined in the launching script is found by its file name."""
    module = job.__module__
    if module == "__main__":
        module = Path(sys.modules["__main__"].__file__).stem
    return f"{module}:{job.__qualname__}"


def as_list(value) -> list:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def frozen(value):
    """Config data made read-only: mappings as MappingProxyType, lists as tuples, all the way down."""
    if isinstance(value, Mapping):
        return MappingProxyType({key: frozen(item) for key, item in value.items()})
    if isinstance(value, list | tuple):
        return tuple(frozen(item) for item in value)
    return value


def thawed(value):
    """A plain copy of frozen config data (dicts and lists), as YAML and jsonargparse take it."""
    if isinstance(value, Mapping):
        return {key: thawed(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return [thawed(item) for item in value]
    return value
