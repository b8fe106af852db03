"""Rewards by name, configured from YAML.

A reward is a function in TRL's form, `fn(completions, **columns) -> list[float | None]`: `completions`
are strings or chat-message lists, the dataset's columns arrive as keyword arguments (`answer`, `id`,
`tests`, ... and, from TRL, `prompts` and `completion_ids`), and `None` means "cannot score this one"
(TRL leaves it out of the mean). The registry maps a name to a *factory* that takes the reward's
parameters and returns such a function, so a recipe's YAML can say

    rewards:
      - {name: math_accuracy, weight: 1.0}
      - {name: overlong, weight: 1.0, max_len: 4096, buffer: 1024}

and `build_rewards` returns the functions and weights for TRL's GRPOTrainer. An unknown name or
parameter is an error that lists what exists.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable

RewardFn = Callable[..., list]

_FACTORIES: dict[str, Callable[..., RewardFn]] = {}
# Modules whose import registers the built-in rewards (imported on first lookup, so that importing
# one reward module does not import them all).
_BUILTIN_MODULES = ("rewards.math", "rewards.format", "rewards.shaping", "rewards.controls", "rewards.code")


# The rewards that are a verifier's verdict ("is it correct"), as opposed to shaping (length, format) or
# controls. A group's variance for DAPO's dynamic sampling, the curriculum's pass rates and the monitor's
# "accuracy never changes" warning are read from these.
ACCURACY_REWARDS = ("math_accuracy", "code_pass_rate", "code_binary")


def accuracy_reward_names(specs: list) -> list[str]:
    """The accuracy rewards among a YAML list of reward specs, in order."""
    names = [spec if isinstance(spec, str) else spec.get("name") for spec in specs]
    return [name for name in names if name in ACCURACY_REWARDS]


class UnknownRewardError(ValueError):
    """A reward name or parameter that the registry does not know."""


def register(name: str):
    """Decorator: register `factory(**params) -> reward function` under `name`."""

    def decorator(factory):
        if name in _FACTORIES and _FACTORIES[name] is not factory:
            raise ValueError(f"a reward named {name!r} is already registered")
        _FACTORIES[name] = factory
        return factory

    return decorator


def _load_builtins() -> None:
    for module in _BUILTIN_MODULES:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as error:
            if error.name != module:  # a missing dependency inside the module is a real error
                raise


def available_rewards() -> list[str]:
    """Names of every registered reward."""
    _load_builtins()
    return sorted(_FACTORIES)


def reward_parameters(name: str) -> dict[str, object]:
    """The parameters a reward accepts, with their defaults."""
    factory = _lookup(name)
    return {
        parameter.name: (None if parameter.default is inspect.Parameter.empty else parameter.default)
        for parameter in inspect.signature(factory).parameters.values()
    }


def _lookup(name: str):
    _load_builtins()
    if name not in _FACTORIES:
        raise UnknownRewardError(f"unknown reward {name!r}; available: {', '.join(sorted(_FACTORIES))}")
    return _FACTORIES[name]


def get_reward(name: str, **params) -> RewardFn:
    """The reward function registered as `name`, configured with `params`."""
    factory = _lookup(name)
    accepted = inspect.signature(factory).parameters
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        listing = ", ".join(f"{key}={value!r}" for key, value in reward_parameters(name).items()) or "none"
        raise UnknownRewardError(f"reward {name!r} has no parameter(s) {unknown}; its parameters: {listing}")
    function = factory(**params)
    function.__name__ = name  # TRL logs each reward under its function's name
    return function


def build_rewards(specs: list[dict]) -> tuple[list[RewardFn], list[float]]:
    """Reward functions and weights from a YAML list of `{name, weight, **params}` entries."""
    functions, weights = [], []
    for index, spec in enumerate(specs):
        if isinstance(spec, str):
            spec = {"name": spec}
        if not isinstance(spec, dict) or "name" not in spec:
            raise UnknownRewardError(f"rewards[{index}] = {spec!r}: expected a mapping with a 'name' key")
        params = dict(spec)
        name = params.pop("name")
        weight = float(params.pop("weight", 1.0))
        functions.append(get_reward(name, **params))
        weights.append(weight)
    return functions, weights
