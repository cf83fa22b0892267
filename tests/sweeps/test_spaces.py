"""Every example's shipped search space (configs/sweeps/<example>.yaml) runs: one shrunk trial each."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from tests.helpers.runs import EXAMPLE_CONFIGS, ROOT, small_run_args
from tests.sweeps.studies import study

SPACES = sorted(path.name for path in (ROOT / "configs" / "sweeps").glob("*.yaml"))


def test_every_example_has_a_search_space():
    assert SPACES == sorted(EXAMPLE_CONFIGS)


def in_space(value, distribution: dict) -> bool:
    """Whether `value` is one the shipped distribution can draw (its types as configs/sweeps/*.yaml write them)."""
    if distribution["type"] == "categorical":
        return value in distribution["choices"]
    if distribution["type"] == "int" and not isinstance(value, int):
        return False
    return distribution["low"] <= value <= distribution["high"]


def trained_with(checkpoint: dict, key: str):
    """What the run itself used for a search-space key: the optimizer's own setting (before any scheduler changed
    the learning rate), a scheduler's setting it keeps in the optimizer's groups (OneCycleLR's `max_lr`), the model's
    or the data module's saved init argument."""
    group = checkpoint["optimizer_states"][0]["param_groups"][0]
    optimizer, scheduler = "model.init_args.optimizer.init_args.", "model.init_args.scheduler.init_args."
    if key.startswith(optimizer):
        name = key.removeprefix(optimizer)
        return group.get(f"initial_{name}", group[name])
    if key.startswith(scheduler):
        return group[key.removeprefix(scheduler)]
    section, _, name = key.partition(".init_args.")
    return checkpoint[{"model": "hyper_parameters", "data": "datamodule_hyper_parameters"}[section]][name]


@pytest.mark.parametrize(
    "config",  # the last example's space in the default run, the others with -m slow: CI budget
    [pytest.param(config, marks=[] if config == SPACES[-1] else [pytest.mark.slow]) for config in SPACES],
)
def test_a_shipped_search_space_runs_a_trial(config, tmp_path, shapes_root):
    """The trial's values are drawn from the shipped space, and its run trained with them."""
    space_file = ROOT / "configs" / "sweeps" / config
    command = [
        sys.executable,
        str(ROOT / "sweep.py"),
        *small_run_args(config, tmp_path, shapes_root),
        "--sweep",
        str(space_file),
        "--sweep.trials",
        "1",
    ]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    name = Path(config).stem
    sweep_dir = tmp_path / f"sweep_{name}"
    assert (sweep_dir / "best.yaml").is_file(), sorted(p.name for p in sweep_dir.iterdir())
    space = yaml.safe_load(space_file.read_text())["space"]
    (trial,) = study(tmp_path, name).trials
    assert trial.params.keys() == space.keys()
    (checkpoint_file,) = (sweep_dir / "trial_0").rglob("last.ckpt")
    checkpoint = torch.load(checkpoint_file, map_location="cpu", weights_only=False)
    for key, value in trial.params.items():
        assert in_space(value, space[key]), f"{key}={value!r} is outside {space[key]}"
        assert trained_with(checkpoint, key) == pytest.approx(value, rel=1e-12), f"{key}: the run did not use {value!r}"
