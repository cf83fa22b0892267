"""The search space: dotted config keys with distributions, checked against the resolved training config, and the
sampled values as command-line overrides or written into a config."""

import json

import optuna

from trainrig.errors import UserInputError, find_user_error
from trainrig.launch.fit_arguments import check_fit_arguments

CHOICE_TYPES = (type(None), bool, int, float, str)  # what Optuna's storages keep
DISTRIBUTION_KEYS = {
    "float": {"type", "low", "high", "log", "step"},
    "int": {"type", "low", "high", "log", "step"},
    "categorical": {"type", "choices"},
}


def distributions(space: dict[str, dict], config: dict) -> dict[str, optuna.distributions.BaseDistribution]:
    """One Optuna distribution per key; a UserInputError naming the first key the config or the format rejects."""
    if not space:
        raise UserInputError("the search space is empty; give --sweep FILE with a `space:` of dotted keys")
    return {key: _distribution(key, spec, config) for key, spec in space.items()}


def _distribution(key: str, spec, config: dict) -> optuna.distributions.BaseDistribution:
    if not has_key(config, key):
        raise UserInputError(
            f"search space key {key} is not in the training config; use a dotted key as on the command line, "
            "as `python cli.py fit --config CONFIG --print_config` shows them"
        )
    kind = spec.get("type") if isinstance(spec, dict) else None
    if kind not in DISTRIBUTION_KEYS:
        raise UserInputError(f"search space key {key}: `type` must be one of {', '.join(DISTRIBUTION_KEYS)}")
    if unknown := set(spec) - DISTRIBUTION_KEYS[kind]:
        raise UserInputError(f"search space key {key}: {kind} takes {sorted(DISTRIBUTION_KEYS[kind])}, not {unknown}")
    try:
        if kind == "categorical":
            if any(not isinstance(choice, CHOICE_TYPES) for choice in spec["choices"]):
                raise UserInputError(
                    f"search space key {key}: categorical choices must be numbers, strings, booleans or null"
                )
            return optuna.distributions.CategoricalDistribution(list(spec["choices"]))
        number = float if kind == "float" else int
        step = spec.get("step")
        return (optuna.distributions.FloatDistribution if kind == "float" else optuna.distributions.IntDistribution)(
            number(spec["low"]),
            number(spec["high"]),
            log=bool(spec.get("log", False)),
            step=None if step is None and kind == "float" else number(step or 1),
        )
    except (KeyError, TypeError, ValueError) as error:
        raise UserInputError(f"search space key {key}: {error}") from error


def has_key(config: dict, dotted: str) -> bool:
    node = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def set_key(config: dict, dotted: str, value) -> None:
    *parents, last = dotted.split(".")
    node = config
    for part in parents:
        node = node[part]
    node[last] = value


def as_overrides(params: dict) -> list[str]:
    """`--key value` pairs, each value in the YAML/JSON form jsonargparse reads back as the same value."""
    overrides = []
    for key, value in params.items():
        overrides += [f"--{key}", value if isinstance(value, str) else json.dumps(value)]
    return overrides


def check_values_parse(space: dict[str, optuna.distributions.BaseDistribution], training_arguments: list[str]) -> None:
    """Every trial's values, as its `cli.py fit` gets them, parsed by the training CLI's own parser before the study
    starts: a value of the wrong type (a float range for an integer setting, a string choice for a number) would
    fail every trial. Each range's ends and every categorical choice are tried, as few parses as that takes."""
    candidates = {key: values_to_try(distribution) for key, distribution in space.items()}
    for index in range(max(len(values) for values in candidates.values())):
        values = {key: tried[index % len(tried)] for key, tried in candidates.items()}
        try:
            check_fit_arguments([*training_arguments, *as_overrides(values)])
        except Exception as error:
            if (refusal := find_user_error(error)) is None:
                raise
            raise UserInputError(f"the search space gives a trial a value cli.py fit refuses: {refusal}") from error


def values_to_try(distribution: optuna.distributions.BaseDistribution) -> list:
    if isinstance(distribution, optuna.distributions.CategoricalDistribution):
        return list(distribution.choices)
    return [distribution.low, distribution.high]
