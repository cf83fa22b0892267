"""Cluster jobs that run the same `cli.py fit` as a local run: `python -m trainrig.kubernetes.jobs --help`."""
