"""Each example's streaming config trains what its map-style config trains: the same model, optimizer and schedule,
seed, epochs, batch size, augmentation and target (the config's `# target:` line), so the two reach the same quality."""

import pytest
import yaml

from tests.helpers.runs import EXAMPLE_CONFIGS, ROOT


def config(name: str) -> dict:
    return yaml.safe_load((ROOT / "configs" / f"{name}.yaml").read_text())


def target(name: str) -> list[str]:
    """The config's stated quality target, the comment line benchmarks/time_to_quality.py reads."""
    lines = (ROOT / "configs" / f"{name}.yaml").read_text().splitlines()
    return [line for line in lines if line.startswith("# target:")]


@pytest.mark.parametrize("example", [config.removesuffix(".yaml") for config in EXAMPLE_CONFIGS])
def test_streaming_config_trains_as_the_map_style_one(example):
    mapped, streamed = config(example), config(f"{example}_streaming")
    assert streamed["model"] == mapped["model"]
    assert streamed["seed_everything"] == mapped["seed_everything"]
    assert streamed["trainer"]["max_epochs"] == mapped["trainer"]["max_epochs"]
    assert streamed["data"]["init_args"]["batch_size"] == mapped["data"]["init_args"]["batch_size"]
    augment = [settings["data"]["init_args"].get("augment") for settings in (streamed, mapped)]
    assert augment[0] == augment[1], "the same random crops and flips, or none"
    assert target(f"{example}_streaming") == target(example) != []
