"""Strategies of this project, registered by name for `--trainer.strategy` (`layer_split`, `pipeline`, ...).

Importing this package registers every strategy class defined in its modules under its `strategy_name`, with its
`strategy_description`: the modules are found rather than listed, so a generated project that drops a strategy's
module drops its name too. Names avoid "ddp": Lightning treats strategy names containing it as DDP variants.
Lightning's DDP and single-device strategies take no `compile` option: every name registered for them (`ddp`,
`ddp_spawn`, ..., `single_device`) is registered again, with the same presets, for the subclass in `compile.py` that
takes it, so that `compile` is one option of every strategy.
`flag.py` reads what `--trainer.strategy` names, for the CLI and every launcher.
"""

import importlib
import inspect
import pkgutil

from lightning.pytorch.strategies import Strategy, StrategyRegistry

from trainrig.strategies.compile import REPLACED

for _found in pkgutil.iter_modules(__path__):
    _module = importlib.import_module(f"{__name__}.{_found.name}")
    for _, _strategy in inspect.getmembers(_module, inspect.isclass):
        _defined_here = _strategy.__module__ == _module.__name__ and _strategy not in REPLACED.values()
        if _defined_here and issubclass(_strategy, Strategy) and _strategy.strategy_name not in StrategyRegistry:
            StrategyRegistry.register(_strategy.strategy_name, _strategy, description=_strategy.strategy_description)

for _name, _entry in list(StrategyRegistry.items()):
    if (_subclass := REPLACED.get(_entry["strategy"])) is not None:
        StrategyRegistry.register(
            _name, _subclass, description=_entry["description"], override=True, **_entry["init_params"]
        )
