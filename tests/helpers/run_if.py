"""One way to skip a test that needs what a machine may lack, saying what (lightning-hydra-template's `RunIf`).

CI is meant to have everything a test here needs except a GPU: root for emulated hosts, the packages of `dev`, the
commands `.ci/run` installs, the full git history. So under `CI=true` a test missing one of those fails, naming it,
instead of skipping, and a CI run can never stay green by skipping what it was meant to run. Only what CI never has
(CUDA devices) still skips there.
"""

import importlib.util
import os
import shutil
from typing import NoReturn

import pytest
import torch

from trainrig.testing.hosts import hosts_unavailable

__all__ = ["missing", "run_if"]

IN_CI = os.environ.get("CI") == "true"


def run_if(
    *,
    packages: tuple[str, ...] = (),
    executables: tuple[str, ...] = (),
    emulated_hosts: bool = False,
    min_cuda_devices: int | None = None,
    max_cuda_devices: int | None = None,
) -> pytest.MarkDecorator:
    """A `needs` mark naming every missing package, command or capability; `tests/conftest.py` acts on it, and marks
    a test that needs a CUDA device `gpu` too, so that `python -m pytest -m gpu` selects every one."""
    lacking = [f"needs the {name} package" for name in packages if importlib.util.find_spec(name) is None]
    lacking += [f"needs the {name} command" for name in executables if shutil.which(name) is None]
    if emulated_hosts and (reason := hosts_unavailable()) is not None:
        lacking.append(reason)
    beyond_ci = []
    if min_cuda_devices is not None and torch.cuda.device_count() < min_cuda_devices:
        beyond_ci.append(f"needs {min_cuda_devices} CUDA device(s); this machine has {torch.cuda.device_count()}")
    if max_cuda_devices is not None and torch.cuda.device_count() > max_cuda_devices:
        beyond_ci.append(
            f"needs at most {max_cuda_devices} CUDA device(s); this machine has {torch.cuda.device_count()}"
        )
    return pytest.mark.needs(lacking=lacking, beyond_ci=beyond_ci, cuda=bool(min_cuda_devices))


def missing(reason: str) -> NoReturn:
    """Skip the running test because this machine lacks what it needs; in CI, which is meant to have it, fail."""
    if IN_CI:
        pytest.fail(f"CI is meant to have what this test needs: {reason}", pytrace=False)
    pytest.skip(reason)


def skip_or_fail(mark: pytest.Mark) -> None:
    """Act on a test's `needs` mark: what CI never has skips everywhere, anything else goes through `missing`."""
    if mark.kwargs["beyond_ci"]:
        pytest.skip("; ".join(mark.kwargs["beyond_ci"]))
    if mark.kwargs["lacking"]:
        missing("; ".join(mark.kwargs["lacking"]))
