"""Strategies of this project, registered by name for `--trainer.strategy` (`layer_split`, `pipeline`, ...).

Importing this package registers every strategy in its modules, found rather than listed, so a generated project
that drops a strategy's module drops its name too. Each class registers itself the way Lightning's own strategies
do, through its `register_strategies` classmethod. Names avoid "ddp": Lightning treats strategy names containing it
as DDP variants. `flag.py` reads what `--trainer.strategy` names, for the CLI and every launcher.
"""

import importlib
import inspect
import pkgutil

from lightning.pytorch.strategies import Strategy, StrategyRegistry

for _found in pkgutil.iter_modules(__path__):
    _module = importlib.import_module(f"{__name__}.{_found.name}")
    for _, _strategy in inspect.getmembers(_module, inspect.isclass):
        defined_here = _strategy.__module__ == _module.__name__
        if defined_here and issubclass(_strategy, Strategy) and "register_strategies" in vars(_strategy):
            _strategy.register_strategies(StrategyRegistry)
