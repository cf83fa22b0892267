"""Hyper-parameter sweep over `cli.py fit` runs:
`python sweep.py --config configs/EXAMPLE.yaml --sweep configs/sweeps/EXAMPLE.yaml [--sweep.trials N] [...]`.

Every argument that is not `--sweep...` is a `cli.py fit` argument shared by every trial; cli.py resolves and checks
them once (`--print_config`) into `base.yaml`. One Optuna driver samples each trial's values and runs the trial as
`cli.py fit --config base.yaml <values as overrides>`. docs/sweeps.md has the details.
"""

import dataclasses
import sys
from pathlib import Path

import yaml

from trainrig.errors.exit_status import entry_point
from trainrig.errors.options import ShortErrorArgumentParser
from trainrig.sweeps.placements import options_class

# What every trial runs: this project's entry point, beside this one.
CLI = Path(__file__).resolve().with_name("cli.py")
# The sweep section's options (with those of the parts the project has).
SweepOptions = options_class()
OWN_FLAGS = ("-h", "--help")
PRINT_CONFIG = "--print_config"
EPILOG = (
    "Every other argument (--config, --trainer.*, --model.*, --data.*) is a `cli.py fit` argument that every trial "
    "shares; `python cli.py fit --help` lists them. --print_config prints the sweep section as a --sweep file and "
    "exits."
)


def parser() -> ShortErrorArgumentParser:
    sweep_parser = ShortErrorArgumentParser(prog="sweep.py", description=__doc__.split("\n\n")[0], epilog=EPILOG)
    sweep_parser.add_class_arguments(SweepOptions, "sweep")
    return sweep_parser


def split_arguments(arguments: list[str]) -> tuple[list[str], list[str]]:
    """(this script's arguments, cli.py fit's arguments)."""
    own, training = [], []
    words = iter(arguments)
    for word in words:
        name = word.split("=", 1)[0]
        if name in OWN_FLAGS:
            own.append(word)
        elif name == "--sweep" or name.startswith("--sweep."):
            own.append(word)
            if "=" not in word:
                own.append(next(words, ""))
        else:
            training.append(word)
    return own, training


@entry_point
def main(arguments: list[str] | None = None) -> None:
    """Exit statuses as cli.py's (trainrig/errors/exit_status.py): 0 done, 2 bad input, 143 stopped (the same command
    continues the study)."""
    arguments = sys.argv[1:] if arguments is None else arguments
    own, training = split_arguments([word for word in arguments if word != PRINT_CONFIG])
    config = parser().parse_args(own)
    options = SweepOptions(**{field.name: config.sweep[field.name] for field in dataclasses.fields(SweepOptions)})
    if PRINT_CONFIG in arguments:
        print(yaml.safe_dump(dataclasses.asdict(options), sort_keys=False), end="")
        return
    from trainrig.sweeps.run import run_sweep  # Optuna and the trial machinery, only once there is a sweep to run

    run_sweep(options, CLI, training)


if __name__ == "__main__":
    main()
