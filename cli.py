"""Train, validate, test or predict with any example: `python cli.py fit --config configs/cnn.yaml`.

Every run, on a laptop or a cluster, goes through this LightningCLI; strategies and
launchers only change how many processes run it and where.
"""

import sys

from lightning.pytorch.cli import LightningCLI

from errors import find_user_error, one_line

# Values only the datamodule knows, handed to the model when both are built. A link whose
# target the chosen model lacks is skipped, so one list serves every example.
DATA_TO_MODEL_LINKS = ("num_classes", "input_size", "vocab", "context_length")


class TemplateCLI(LightningCLI):
    def add_arguments_to_parser(self, parser) -> None:
        for name in DATA_TO_MODEL_LINKS:
            parser.link_arguments(f"data.{name}", f"model.init_args.{name}", apply_on="instantiate")


def main(args: list[str] | None = None) -> None:
    try:
        TemplateCLI(
            subclass_mode_model=True,
            subclass_mode_data=True,
            auto_configure_optimizers=False,
            save_config_kwargs={"overwrite": False},
            args=args,
        )
    except Exception as error:
        user_error = find_user_error(error)
        if user_error is None:
            raise
        print(f"error: {one_line(user_error)}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
