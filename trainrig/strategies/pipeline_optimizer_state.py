"""A pipeline's optimizer state re-keyed, so that its checkpoints hold the single-device layout any strategy loads.

Each process of a pipeline holds the optimizer state of its own stages only. torch's distributed state-dict helpers
exchange it keyed by parameter name; a single-device checkpoint numbers the parameters by their position in the
whole model. The strategy (pipeline.py) gathers every process's part by name, merges and numbers them to save, and
names them again to load, each process taking its own entries.
"""

import torch
from torch import nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict, set_optimizer_state_dict

# Optimizer state keyed by parameter name, whole tensors: how torch's distributed state-dict helpers exchange it.
BY_NAME = StateDictOptions(full_state_dict=True)


def hyperparameters(param_group: dict) -> dict:
    """A parameter group's settings (learning rate, momentum, ...) without its parameters."""
    return {key: value for key, value in param_group.items() if key not in ("params", "param_names")}


def state_by_name(module: nn.Module, optimizer: torch.optim.Optimizer) -> dict:
    """This process's optimizer state keyed by parameter name.

    Before the first step there is no state to carry, and torch's helper would create it with a zero-gradient step
    that Adam counts: only the parameter groups are taken then.
    """
    if optimizer.state:
        return get_optimizer_state_dict(module, optimizer, options=BY_NAME)
    names = {id(param): name for name, param in module.named_parameters()}
    groups = [
        {**hyperparameters(group), "params": [names[id(param)] for param in group["params"]]}
        for group in optimizer.param_groups
    ]
    return {"state": {}, "param_groups": groups}


def load_numbered_state(module: nn.Module, optimizer: torch.optim.Optimizer, state: dict, names: list[str]) -> None:
    """Take this process's entries of a single-device optimizer state (`numbered` over `names`)."""
    if not state["state"]:  # saved before the first step: see state_by_name
        for group, saved in zip(optimizer.param_groups, state["param_groups"]):
            group.update(hyperparameters(saved))
        return
    set_optimizer_state_dict(module, optimizer, named(state, names), options=BY_NAME)


def merged(parts: list[dict]) -> dict:
    """One optimizer state by parameter name from every process's part of it (the same groups on each)."""
    return {
        "state": {name: value for part in parts for name, value in part["state"].items()},
        "param_groups": [
            {
                **hyperparameters(group),
                "params": [name for part in parts for name in part["param_groups"][index]["params"]],
            }
            for index, group in enumerate(parts[0]["param_groups"])
        ],
    }


def numbered(by_name: dict, names: list[str]) -> dict:
    """A state keyed by parameter name, keyed instead by each parameter's position in the whole model."""
    position = {name: index for index, name in enumerate(names)}
    return {
        "state": {position[name]: by_name["state"][name] for name in names if name in by_name["state"]},
        "param_groups": [
            {**group, "params": sorted(position[name] for name in group["params"])} for group in by_name["param_groups"]
        ],
    }


def named(numbered_state: dict, names: list[str]) -> dict:
    """The inverse of `numbered`: the form torch's set_optimizer_state_dict picks each process's entries from."""
    return {
        "state": {names[index]: value for index, value in numbered_state["state"].items()},
        "param_groups": [
            {**group, "params": [names[index] for index in group["params"]]} for group in numbered_state["param_groups"]
        ],
    }
