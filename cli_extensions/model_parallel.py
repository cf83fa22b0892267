"""The model-parallel strategies: importing this module registers `layer_split` and `pipeline` for
`--trainer.strategy` (strategy_flag.py gives them their options)."""

import strategies  # noqa: F401
