"""The installed project works outside the checkout: every module the code can import at run time is in the wheel.

A cluster's scheduler may unpickle the task, and each worker imports the run's modules from its installed copy, so
a package missing from `pyproject.toml` fails only on another machine. The expected modules come from the work tree:
a new folder of modules is expected in the wheel unless pyproject.toml excludes it as development-only.
"""

import subprocess
import tomllib
from pathlib import Path

from tests.helpers.installed import ROOT, installed_python

# Folders of modules that only development and the template use (pyproject.toml excludes them from the wheel);
# everything else is imported at run time.
_PACKAGES = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
DEVELOPMENT_ONLY = {pattern.removesuffix("*") for pattern in _PACKAGES["exclude"]}
IMPORT_TIMEOUT_S = 180


def runtime_modules() -> list[str]:
    """Dotted names of the top-level modules and of every module in the runtime folders of the work tree."""
    modules = [path.stem for path in ROOT.glob("*.py")]
    for folder in sorted(path for path in ROOT.iterdir() if path.is_dir() and path.name not in DEVELOPMENT_ONLY):
        if folder.name.startswith(".") or not folder.name.isidentifier():
            continue
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            modules.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return modules


def test_runtime_modules_cover_the_packages():
    """The list the next test imports is the real one: it holds the known packages, the last one forgotten included."""
    top_level = {module.split(".")[0] for module in runtime_modules()}
    assert {"cli", "errors", "resume", "callbacks", "lightning_modules", "datamodules", "models"} <= top_level
    assert not top_level & DEVELOPMENT_ONLY


def test_every_runtime_module_imports_from_the_installed_wheel(tmp_path: Path):
    modules = runtime_modules()
    script = (
        "import importlib, sys\nfor name in sys.argv[1:]:\n    print(name, importlib.import_module(name).__file__)\n"
    )
    elsewhere = tmp_path / "another-machine"
    elsewhere.mkdir()
    python = installed_python()
    result = subprocess.run(
        [python, "-c", script, *modules],
        cwd=elsewhere,
        env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "HOME": str(elsewhere)},
        capture_output=True,
        text=True,
        timeout=IMPORT_TIMEOUT_S,
    )
    assert result.returncode == 0, f"not importable outside the checkout (add it to pyproject.toml):\n{result.stderr}"
    locations = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert sorted(locations) == sorted(modules)
    venv = python.parent.parent
    outside = {name: path for name, path in locations.items() if not Path(path).is_relative_to(venv)}
    assert not outside, f"imported from outside the installed wheel: {outside}"
