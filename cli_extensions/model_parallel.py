"""The model-parallel strategies, registered by name (`--trainer.strategy pipeline`), take their own options."""

import strategies


def rewrite_args(args: list[str]) -> list[str]:
    """`--trainer.strategy pipeline` (or layer_split) takes `--trainer.strategy.init_args.*` options too."""
    return strategies.with_class_paths(args)
