"""The project as another machine gets it: its wheel, installed (not editable) into a fresh virtual environment.

The environment reaches the running interpreter's site-packages (torch, Lightning and the rest) through a `.pth`
line, so nothing is downloaded; that line does not run the site-packages' own `.pth` files, so an editable install
of the checkout there stays invisible. Run from a directory outside the checkout, this Python imports the project
only from the wheel.
"""

import atexit
import functools
import shutil
import site
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.helpers import ROOT

# What a build reads besides the packages themselves; never the checkout's environments, logs or data.
_NOT_BUILD_INPUTS_ANYWHERE = shutil.ignore_patterns(".*", "build", "dist", "*.egg-info", "__pycache__")
_NOT_BUILD_INPUTS_AT_THE_ROOT = {"logs", "data"}  # not trainrig/data, a package


def not_build_inputs(directory: str, names: list[str]) -> set[str]:
    """shutil.copytree's ignore: tools' folders anywhere; the run logs and data sets only at the checkout's root."""
    ignored = _NOT_BUILD_INPUTS_ANYWHERE(directory, names)
    if Path(directory) == ROOT:
        ignored |= _NOT_BUILD_INPUTS_AT_THE_ROOT & set(names)
    return ignored


__all__ = ["ROOT", "build_wheel", "built_wheel", "installed_python", "not_build_inputs"]


def build_wheel(destination: Path) -> Path:
    """Build the project's wheel from a copy of the work tree (a build writes into the tree it builds)."""
    source = destination / "source"
    shutil.copytree(ROOT, source, ignore=not_build_inputs)
    wheels = destination / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--no-index"]
        + ["--wheel-dir", str(wheels), str(source)],
        check=True,
        capture_output=True,
        text=True,
    )
    (wheel,) = wheels.glob("*.whl")
    return wheel


@functools.cache
def _workdir() -> Path:
    workdir = Path(tempfile.mkdtemp(prefix="ldt-installed-"))
    atexit.register(shutil.rmtree, workdir, ignore_errors=True)
    return workdir


@functools.cache
def built_wheel() -> Path:
    """The project's wheel, built once per test session; removed at exit."""
    return build_wheel(_workdir())


@functools.cache
def installed_python() -> Path:
    """The Python of a fresh environment holding only the project's wheel and the dependencies already here.

    Built once per test session; removed at exit.
    """
    wheel = built_wheel()
    venv = _workdir() / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site_packages = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    (site_packages / "dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index"]
        + ["--target", str(site_packages), str(wheel)],
        check=True,
        capture_output=True,
        text=True,
    )
    return python
