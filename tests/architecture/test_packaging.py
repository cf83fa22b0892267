"""The installed project works outside the checkout, and installs only its own names.

A cluster's scheduler may unpickle the task, and each worker imports the run's modules from its installed copy, so
a package missing from `pyproject.toml` fails only on another machine. And a wheel's top-level names share
site-packages with every other installed package: besides the user's wing (models, LightningModules, datamodules,
callbacks) and the entry points, the project installs one package, `trainrig`, the machinery.
"""

import subprocess
import zipfile
from pathlib import Path

from tests.helpers.installed import ROOT, built_wheel, installed_python
from tests.helpers.parts import declared

USERS_WING = ("models", "lightning_modules", "datamodules", "callbacks")
MACHINERY = "trainrig"
ENTRY_POINTS = ("cli", *declared("ENTRY_POINTS"))  # the optional parts' own in tests/<part>/part.py
# Folders of modules that only development and the template use: never installed.
DEVELOPMENT_ONLY = ("tests", "benchmarks", "scripts", "hooks", *declared("DEVELOPMENT_ONLY"))
IMPORT_TIMEOUT_S = 180


def folders_of_modules() -> list[str]:
    return sorted(
        path.name
        for path in ROOT.iterdir()
        if path.is_dir() and path.name.isidentifier() and not path.name.startswith(".") and any(path.rglob("*.py"))
    )


def runtime_modules() -> list[str]:
    """Dotted names of the root modules and of every module in the installed folders of the work tree."""
    modules = [path.stem for path in ROOT.glob("*.py")]
    for folder in folders_of_modules():
        if folder in DEVELOPMENT_ONLY:
            continue
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            modules.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return modules


def test_the_checkout_holds_only_the_users_wing_the_machinery_and_development_folders():
    """A new folder or module of code at the root would be a new top-level name once installed: it belongs in the
    user's wing, in trainrig/, or among the development folders."""
    unknown = set(folders_of_modules()) - {*USERS_WING, MACHINERY, *DEVELOPMENT_ONLY}
    assert not unknown, f"new folders of modules at the root: {sorted(unknown)}; move them into {MACHINERY}/"
    root_modules = {path.stem for path in ROOT.glob("*.py")}
    assert root_modules <= set(ENTRY_POINTS), f"root modules other than the entry points: {root_modules}"


def test_the_wheel_installs_only_the_users_wing_the_entry_points_and_the_machinery():
    with zipfile.ZipFile(built_wheel()) as wheel:
        top_level = {name.split("/")[0].removesuffix(".py") for name in wheel.namelist()}
    top_level = {name for name in top_level if not name.endswith(".dist-info")}
    present_entry_points = {name for name in ENTRY_POINTS if (ROOT / f"{name}.py").is_file()}
    present_wing = {name for name in USERS_WING if (ROOT / name).is_dir()}
    assert top_level == {*present_wing, *present_entry_points, MACHINERY}


def test_every_runtime_module_imports_from_the_installed_wheel(tmp_path: Path):
    modules = runtime_modules()
    assert {"cli", MACHINERY, f"{MACHINERY}.resume.checkpoint", *USERS_WING} <= set(modules)
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
