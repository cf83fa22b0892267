"""Hyper-parameter sweeps: one Optuna driver samples, every trial is an ordinary `cli.py fit` run with the sampled
values as overrides (`python sweep.py --help`, docs/sweeps.md).

Optuna is imported only by the driver (`driver`, `results`); cli.py never imports this package, and a trial imports
only `pruning`, the callback through which its rank 0 reports to the driver.
"""
