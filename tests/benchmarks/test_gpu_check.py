"""The GPU check's CPU rehearsal: benchmarks/gpu/check.sh with `--device cpu` runs every step at tiny sizes, so that
its harness, its wheel list and its figures work before a GPU machine is lent for the few minutes it gets."""

import json
import os
import re
import subprocess
import sys
import tomllib

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.helpers import ROOT

# What the GPU machine's image already holds of this project's needs (/work/.library/device/KINDS.md, 2026-11-17).
IN_THE_IMAGE = """
    torch torchvision lightning pytorch-lightning torchmetrics numpy pillow pyyaml psutil matplotlib pytest
    pytest-timeout packaging requests jinja2 click msgpack cloudpickle fsspec toolz sortedcontainers urllib3 certifi
    idna charset-normalizer anyio httpx httpcore h11 protobuf tqdm typing-extensions zipp xxhash markupsafe
""".split()
# Development tools no test imports. Every other one travels: `pytest -m gpu` imports each test module to select the
# marked tests, and a module importing what the machine lacks (cookiecutter, jsonschema) is a collection error there.
NOT_ON_THE_GPU = {"ruff", "pre-commit"}


def carried() -> set[str]:
    lines = (ROOT / "benchmarks" / "gpu" / "wheels.txt").read_text().splitlines()
    return {canonicalize_name(Requirement(line).name) for line in lines if line and not line.startswith("#")}


def test_the_carried_wheels_and_the_image_hold_every_package_the_project_needs():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"].values()
    needed = [*project["dependencies"], *(line for extra in extras for line in extra)]
    names = {canonicalize_name(Requirement(line).name) for line in needed} - NOT_ON_THE_GPU
    missing = names - carried() - {canonicalize_name(name) for name in IN_THE_IMAGE}
    assert not missing, f"neither carried (benchmarks/gpu/wheels.txt) nor in the GPU image: {sorted(missing)}"


@pytest.mark.slow  # CI budget: 54 s; rerun before each GPU call
def test_the_rehearsal_runs_every_step_and_writes_one_json_of_figures(tmp_path):
    result = subprocess.run(
        ["bash", "benchmarks/gpu/check.sh", str(tmp_path), "--device", "cpu"],
        cwd=ROOT,
        env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    figures = json.loads((tmp_path / "figures.json").read_text())
    assert figures["machine"]["device"] == "cpu" and re.fullmatch(
        r"[0-9a-f]{40}( \(with uncommitted changes\))?", figures["machine"]["commit"]
    )
    assert {name: step["exit"] for name, step in figures["steps"].items()} == {
        "gpu_tests": 0,
        "import_all": 0,
        "overhead": 0,
        "profile_mlp": 0,
        "gpu_defaults": 0,
    }
    assert figures["gpu_tests"] and {case["outcome"] for case in figures["gpu_tests"]} == {"skipped"}
    assert figures["overhead"] and figures["gpu_defaults"], "a benchmark wrote no figures"
    assert "run_training_batch" in figures["profiles"]["fit-profile_mlp"]
    assert "== gpu_defaults: exit 0" in (tmp_path / "check.log").read_text()


def test_the_older_torch_check_refuses_a_version_it_cannot_pair_in_one_line():
    result = subprocess.run(
        ["bash", "benchmarks/gpu/older_torch.sh", "2.11"], cwd=ROOT, capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        "usage: benchmarks/gpu/older_torch.sh TORCH_VERSION [PYTEST ARGS...], a version such as 2.11.0"
    ]
