"""Model-parallel strategies, registered so that `--trainer.strategy layer_split|pipeline` finds them.

Importing this package (cli.py does) registers the names. Their names avoid "ddp": Lightning
treats strategy names containing it as DDP variants.
"""

from lightning.pytorch.strategies import StrategyRegistry

from strategies.layer_split import LayerSplitStrategy
from strategies.pipeline import PipelineStrategy

for _strategy, _description in (
    (LayerSplitStrategy, "one process, stage i of the model on device i (the reference's model parallelism)"),
    (PipelineStrategy, "one process per stage, micro-batched with torch.distributed.pipelining (any schedule)"),
):
    if _strategy.strategy_name not in StrategyRegistry:
        StrategyRegistry.register(_strategy.strategy_name, _strategy, description=_description)


__all__ = ["LayerSplitStrategy", "PipelineStrategy"]
