"""Model-parallel strategies, registered so that `--trainer.strategy layer_split|pipeline` finds them.

Importing this package (cli.py does) registers the names. Their names avoid "ddp": Lightning
treats strategy names containing it as DDP variants.
"""

from lightning.pytorch.strategies import StrategyRegistry

from strategies.layer_split import LayerSplitStrategy
from strategies.pipeline import PipelineStrategy

STRATEGY_OPTION = "--trainer.strategy"

for _strategy, _description in (
    (LayerSplitStrategy, "one process, stage i of the model on device i (the reference's model parallelism)"),
    (PipelineStrategy, "one process per stage, micro-batched with torch.distributed.pipelining (any schedule)"),
):
    if _strategy.strategy_name not in StrategyRegistry:
        StrategyRegistry.register(_strategy.strategy_name, _strategy, description=_description)


def with_class_paths(args: list[str]) -> list[str]:
    """Command-line arguments with `--trainer.strategy pipeline` (or layer_split) given as the class path
    when `--trainer.strategy.init_args.*` options follow.

    jsonargparse reads a bare name as a plain string, to which options cannot be added; a class path
    takes them. Without options the name stays (Lightning's registry resolves it; jsonargparse
    would read a lone class path as a string too).
    """
    class_paths = {
        strategy.strategy_name: f"{strategy.__module__}.{strategy.__name__}"
        for strategy in (LayerSplitStrategy, PipelineStrategy)
    }
    rewritten = list(args)
    if not any(arg.startswith(f"{STRATEGY_OPTION}.") for arg in args):
        return rewritten
    for index, arg in enumerate(args):
        option, equals, value = arg.partition("=")
        if option != STRATEGY_OPTION:
            continue
        if equals and value in class_paths:
            rewritten[index] = f"{option}={class_paths[value]}"
        elif not equals and index + 1 < len(args) and args[index + 1] in class_paths:
            rewritten[index + 1] = class_paths[args[index + 1]]
    return rewritten


__all__ = ["LayerSplitStrategy", "PipelineStrategy", "with_class_paths"]
