"""A sweep from start to results: resolve the shared training config once, open (or continue) the study, drive the
trials, write the results."""

import dataclasses
import subprocess
import sys
from pathlib import Path

import yaml

from errors import UserInputError
from sweeps.driver import Driver, open_study, say
from sweeps.options import SweepOptions
from sweeps.results import write_results
from sweeps.space import distributions
from sweeps.trials import CLI

# Loggers whose runs live in save_dir/name/, where `--ckpt_path last` finds a trial's checkpoints.
RUN_FOLDER_LOGGERS = ("CSVLogger", "ContinuingCSVLogger", "TensorBoardLogger")


def run_sweep(options: SweepOptions, training_arguments: list[str]) -> None:
    check_options(options)
    base_text = resolved_training_config(training_arguments)
    base = yaml.safe_load(base_text)
    space = distributions(options.space, base)
    if options.sampler == "grid" and any(not hasattr(d, "choices") for d in space.values()):
        raise UserInputError("--sweep.sampler grid needs every search space key to be categorical")
    save_dir, logger_name = logger_folders(base)
    name = options.name or logger_name
    sweep_dir = (Path(save_dir) / f"sweep_{name}").resolve()
    sweep_dir.mkdir(parents=True, exist_ok=True)
    base_path = sweep_dir / "base.yaml"
    if base_path.exists() and base_path.read_text() != base_text:
        say(f"the training config differs from the one in {base_path}; trials from now on use the new one")
    base_path.write_text(base_text)
    (sweep_dir / "sweep.yaml").write_text(yaml.safe_dump(dataclasses.asdict(options), sort_keys=False))
    study = open_study(options, name, sweep_dir, space)
    say(f"study {name} in {options.storage or sweep_dir / 'study.journal'}: {len(study.trials)} trial(s) so far")
    Driver(options, study, space, base_path, sweep_dir).run()
    write_results(study, base, sweep_dir, options.metric)


def check_options(options: SweepOptions) -> None:
    for name in ("trials", "parallel", "ranks_per_trial"):
        value = getattr(options, name, None)
        if value is not None and value < 1:
            raise UserInputError(f"--sweep.{name} must be at least 1, got {value}")
    if options.max_restarts < 0:
        raise UserInputError(f"--sweep.max_restarts must be 0 or more, got {options.max_restarts}")


def resolved_training_config(arguments: list[str]) -> str:
    """The trials' shared config as `cli.py fit --print_config` resolves it; cli.py's own error and status if not."""
    result = subprocess.run(
        [sys.executable, str(CLI), "fit", *arguments, "--print_config"], capture_output=True, text=True
    )
    if result.returncode != 0:
        print(result.stderr, end="", file=sys.stderr)
        sys.exit(result.returncode)
    return result.stdout


def logger_folders(base: dict) -> tuple[str, str]:
    """(save_dir, name) of the config's logger, under which the sweep's folder goes."""
    logger = base.get("trainer", {}).get("logger")
    class_name = logger.get("class_path", "").rsplit(".", 1)[-1] if isinstance(logger, dict) else ""
    if class_name not in RUN_FOLDER_LOGGERS:
        raise UserInputError(
            f"a sweep needs trainer.logger to be one of {', '.join(RUN_FOLDER_LOGGERS)} (each trial logs and "
            f"checkpoints in its own folder of it), not {class_name or logger}"
        )
    init_args = logger.get("init_args", {})
    return init_args.get("save_dir") or "logs", init_args.get("name") or "lightning_logs"
