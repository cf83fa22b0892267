"""A sweep from start to results: resolve the shared training config once, open (or continue) the study, drive the
trials, write the results."""

import dataclasses
import subprocess
import sys
from pathlib import Path

import yaml

from trainrig.errors import UserInputError
from trainrig.sweeps.driver import Driver, open_study, say
from trainrig.sweeps.options import SweepOptions
from trainrig.sweeps.placements import trial_placement
from trainrig.sweeps.results import write_results
from trainrig.sweeps.space import check_values_parse, distributions
from trainrig.sweeps.trial_logging import trial_logging
from trainrig.sweeps.trials import check_only_mine


def run_sweep(options: SweepOptions, cli: Path, training_arguments: list[str]) -> None:
    """Every trial runs `cli` (the project's cli.py, which the sweep's entry point hands in) with the shared training
    arguments and its own values."""
    check_options(options)
    base_text = resolved_training_config(cli, training_arguments)
    base = yaml.safe_load(base_text)
    space = distributions(options.space, base)
    check_values_parse(space, training_arguments)
    if options.sampler == "grid" and any(not hasattr(d, "choices") for d in space.values()):
        raise UserInputError("--sweep.sampler grid needs every search space key to be categorical")
    logging = trial_logging(base)
    name = options.name or logging.default_name
    sweep_dir = logging.sweep_dir(name)
    sweep_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
    # Its base.yaml names the classes every trial imports: a folder others can write would let them choose the code.
    check_only_mine(sweep_dir, sweep_dir)
    study = open_study(options, name, sweep_dir, space)  # first: a damaged journal stops it before it writes
    base_path = sweep_dir / "base.yaml"
    if base_path.exists() and base_path.read_text() != base_text:
        say(f"the training config differs from the one in {base_path}; trials from now on use the new one")
    base_path.write_text(base_text)
    base_path.chmod(0o644)  # whatever the umask
    (sweep_dir / "sweep.yaml").write_text(yaml.safe_dump(dataclasses.asdict(options), sort_keys=False))
    say(f"study {name} in {options.storage or sweep_dir / 'study.journal'}: {len(study.trials)} trial(s) so far")
    Driver(options, cli, study, space, base_path, sweep_dir, logging, trial_placement(options, base, base_path)).run()
    write_results(study, base, sweep_dir, options.metric)


def check_options(options: SweepOptions) -> None:
    for name in ("trials", "parallel"):
        value = getattr(options, name)
        if value < 1:
            raise UserInputError(f"--sweep.{name} must be at least 1, got {value}")
    for name in ("max_restarts", "pruner_startup_trials", "pruner_warmup_epochs"):
        value = getattr(options, name)
        if value < 0:
            raise UserInputError(f"--sweep.{name} must be 0 or more, got {value}")


def resolved_training_config(cli: Path, arguments: list[str]) -> str:
    """The trials' shared config as `cli.py fit --print_config` resolves it; cli.py's own error and status if not."""
    result = subprocess.run(
        [sys.executable, str(cli), "fit", *arguments, "--print_config"], capture_output=True, text=True
    )
    if result.returncode != 0:
        print(result.stderr, end="", file=sys.stderr)
        sys.exit(result.returncode)
    return result.stdout
