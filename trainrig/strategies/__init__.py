"""Strategies of this project, registered by name for `--trainer.strategy` (`layer_split`, `pipeline`, ...).

Importing this package registers every strategy class defined in its modules under its `strategy_name`, with its
`strategy_description`: the modules are found rather than listed, so a generated project that drops a strategy's
module drops its name too. An optional part registers its own strategies the same way, calling `register_strategies`
from its plugin. Only a DDP strategy's name contains "ddp": Lightning treats strategy names containing it as DDP
variants.
Lightning's DDP and single-device strategies take no `compile` option: every name registered for them (`ddp`,
`ddp_spawn`, ..., `single_device`) is registered again, with the same presets, for the subclass in `compile.py` that
takes it, so that `compile` is one option of every strategy.
`strategy_option.py` reads what `--trainer.strategy` names, for the CLI and every launcher.
"""

import importlib
import inspect
import pkgutil
from types import ModuleType

from lightning.pytorch.strategies import Strategy, StrategyRegistry

from trainrig.strategies.compile import REPLACED

__all__ = ["register_strategies"]


def register_strategies(module: ModuleType) -> None:
    """Register every strategy class `module` defines under its `strategy_name`, with its `strategy_description`;
    a name already registered keeps its class (a module imported again registers nothing twice)."""
    for _, strategy in inspect.getmembers(module, inspect.isclass):
        defined_here = strategy.__module__ == module.__name__ and strategy not in REPLACED.values()
        if defined_here and issubclass(strategy, Strategy) and strategy.strategy_name not in StrategyRegistry:
            StrategyRegistry.register(strategy.strategy_name, strategy, description=strategy.strategy_description)


for _found in pkgutil.iter_modules(__path__):
    register_strategies(importlib.import_module(f"{__name__}.{_found.name}"))

for _name, _entry in list(StrategyRegistry.items()):
    if (_subclass := REPLACED.get(_entry["strategy"])) is not None:
        StrategyRegistry.register(
            _name, _subclass, description=_entry["description"], override=True, **_entry["init_params"]
        )
