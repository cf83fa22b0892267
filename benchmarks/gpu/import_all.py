"""Imports every module of trainrig, so that on an older torch (the GPU machine's) a feature newer than it fails here,
by name, rather than in the middle of a run: `python -m benchmarks.gpu.import_all`."""

import importlib
import pkgutil

import trainrig

for module in pkgutil.walk_packages(trainrig.__path__, "trainrig."):
    importlib.import_module(module.name)
print(f"imported every module of trainrig with torch {importlib.import_module('torch').__version__}")
