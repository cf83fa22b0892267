"""One way to skip a test that needs what a machine may lack, saying what (lightning-hydra-template's `RunIf`)."""

import importlib.util
import shutil

import pytest
import torch

from trainrig.testing.hosts import hosts_unavailable

__all__ = ["run_if"]


def run_if(
    *,
    packages: tuple[str, ...] = (),
    executables: tuple[str, ...] = (),
    emulated_hosts: bool = False,
    max_cuda_devices: int | None = None,
) -> pytest.MarkDecorator:
    """A `skipif` mark whose reason names every missing package, command or capability."""
    reasons = [f"needs the {name} package" for name in packages if importlib.util.find_spec(name) is None]
    reasons += [f"needs the {name} command" for name in executables if shutil.which(name) is None]
    if emulated_hosts and (reason := hosts_unavailable()) is not None:
        reasons.append(reason)
    if max_cuda_devices is not None and torch.cuda.device_count() > max_cuda_devices:
        reasons.append(f"needs at most {max_cuda_devices} CUDA device(s); this machine has {torch.cuda.device_count()}")
    return pytest.mark.skipif(bool(reasons), reason="; ".join(reasons))
