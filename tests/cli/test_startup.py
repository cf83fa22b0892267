"""Starting the CLI imports no optional part's packages: those load only when a run asks for their part."""

import subprocess
import sys
import tomllib

from packaging.requirements import Requirement

from tests.helpers.runs import ROOT

# Packages of an extra that a required dependency imports by itself whenever they are installed: torchmetrics imports
# matplotlib (an extra's, for plots) at its own import.
IMPORTED_BY_REQUIRED = {"matplotlib"}


def optional_packages() -> list[str]:
    """The top-level packages of every optional part's extra: the requirement's name and its extras' names."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    requirements = [Requirement(line) for name, lines in extras.items() if name != "dev" for line in lines]
    packages = {package.replace("-", "_") for r in requirements for package in (r.name, *r.extras)}
    return sorted(packages - IMPORTED_BY_REQUIRED)


OPTIONAL_HEAVY = optional_packages()

PROBE = f"""
import runpy, sys
sys.argv = ["cli.py", *sys.argv[1:]]
try:
    runpy.run_path("cli.py", run_name="__main__")
except SystemExit as exit:
    assert exit.code == 0, exit.code
print(sorted({{name.split(".")[0] for name in sys.modules}} & set({OPTIONAL_HEAVY!r})))
"""


def test_help_imports_no_optional_heavy_package():
    for args in (["--help"], ["fit", "--help"]):
        result = subprocess.run(
            [sys.executable, "-c", PROBE, *args], cwd=ROOT, capture_output=True, text=True, timeout=120
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip().splitlines()[-1] == "[]"
