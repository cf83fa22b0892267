import subprocess
import sys

from conftest import ROOT

OPTIONAL_HEAVY = (
    "wandb",  # cookiecutter: only with wandb
    "dask",  # cookiecutter: only with dask
    "distributed",  # cookiecutter: only with dask
)

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
