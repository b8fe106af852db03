"""Rewards by name, configured from YAML.

A reward is a function in TRL's form, `fn(completions, **columns) -> list[float | None]`: `completions`
are strings or chat-message lists, the dataset's columns arrive as keyword arguments (`answer`, `id`,
`tests`, ... and, from TRL, `prompts` and `completion_ids`), and `None` means "cannot score this one"
(TRL leaves it out of the mean). The registry maps a name to a *factory* that takes the reward's
parameters and returns such a function, so a recipe's YAML can say

    rewards:
      - {name: math_accuracy, weight: 1.0}
      - {name: overlong, weight: 1.0, max_len: 4096, buffer: 1024}

and `build_rewards` returns the functions and weights for TRL's GRPOTrainer. A reward module registers its
factories with `@register(name)`, and `@register(name, accuracy=True)` for a verifier's verdict; the registry
finds the modules itself (every module of this package but the sandbox and the math-verify worker), so a new
reward is one decorated factory in a module under rewards/, with no list to edit; a reward of the user's,
outside the repository, is named `path/to/file.py:name` or `package.module:name` (rewards/external.py). An unknown name or
parameter is an error that lists what exists and suggests the nearest spelling; `check_reward_specs`
runs the same checks (and the parameters' types) as the config is parsed, so that a mistake in the list is
one line naming the entry before any model loads.
"""

from __future__ import annotations

import importlib
import inspect
import os
import types
import typing
from collections.abc import Callable

from basics.did_you_mean import did_you_mean
from basics.option_values import yaml_numbers
from rewards import external
from rewards.external import is_reference, resolve

RewardFn = Callable[..., list]

_FACTORIES: dict[str, Callable[..., RewardFn]] = {}
# The rewards registered with accuracy=True: a verifier's verdict ("is it correct"), as opposed to shaping
# (length, format) or controls. A group's variance for DAPO's dynamic sampling, the curriculum's pass rates and
# the monitor's "accuracy never changes" warning are read from these.
_ACCURACY: set[str] = set()
# Rewards from outside the repository, by their reference (`path/to/file.py:name`): (factory, accuracy).
_EXTERNAL: dict[str, tuple[Callable[..., RewardFn], bool]] = {}

# Where the built-in rewards are found: every module of this package, imported on first lookup (so that
# importing one reward module does not import them all), except these and what is under them. The sandbox
# registers no reward and half of it is files that its launcher runs by path, in a child process; the worker
# is the entry point of a math-verify subprocess.
_NOT_REWARD_MODULES = ("rewards.code.sandbox", "rewards.math.worker")
_builtins_loaded = False


def accuracy_rewards() -> tuple[str, ...]:
    """The names of every reward registered with accuracy=True, sorted."""
    _load_builtins()
    return tuple(sorted(_ACCURACY))


def accuracy_reward_names(specs: list) -> list[str]:
    """The accuracy rewards among a YAML list of reward specs, in order (as TRL logs them: a reference's name)."""
    names = [spec if isinstance(spec, str) else spec.get("name") for spec in specs]
    return [name.rpartition(":")[2] for name in names if is_accuracy_reward(name)]


def is_accuracy_reward(name) -> bool:
    """Is `name` a registered accuracy reward, or a reference to one outside the repository (imported here)?"""
    if not isinstance(name, str):
        return False
    try:
        _lookup(name)
    except UnknownRewardError:
        return False
    return name in _ACCURACY or (name in _EXTERNAL and _EXTERNAL[name][1])


class RewardConfigError(ValueError):
    """An entry of a rewards list that cannot be built; the message names the entry and the fix."""


class UnknownRewardError(RewardConfigError):
    """A reward name or parameter that the registry does not know."""


def _did_you_mean(word: str, options) -> str:
    """'; did you mean 'x'? ' for the nearest of `options` (a typo's likeliest fix), else '; '."""
    hint = did_you_mean([word], options, cutoff=0.6, quote=True)
    return f"; {hint} " if hint else "; "


def register(name: str, accuracy: bool = False):
    """Decorator: register `factory(**params) -> reward function` under `name`; `accuracy=True` makes it an
    accuracy reward (a verifier's verdict), which dynamic sampling, the curriculum and the monitor read."""

    def decorator(factory):
        if external.capturing is not None:  # a module of the user's being imported: its rewards stay its own
            external.capturing[name] = (factory, accuracy)
            return factory
        if name in _FACTORIES and _FACTORIES[name] is not factory:
            raise ValueError(f"a reward named {name!r} is already registered")
        _FACTORIES[name] = factory
        if accuracy:
            _ACCURACY.add(name)
        else:
            _ACCURACY.discard(name)
        return factory

    return decorator


def unregister(name: str) -> None:
    """Forget the reward registered as `name` (a test's own, say); nothing if there is none."""
    _FACTORIES.pop(name, None)
    _ACCURACY.discard(name)


def _reward_modules(path: list[str], prefix: str) -> list[str]:
    """The modules under the package folders `path`, named with `prefix`, but _NOT_REWARD_MODULES; found on
    disk, so that no package is imported to list what it holds."""
    import pkgutil  # here: importing the registry stays as cheap as before

    found = []
    for info in pkgutil.iter_modules(path, prefix):
        if info.name in _NOT_REWARD_MODULES:
            continue
        found.append(info.name)
        if info.ispkg:
            folder = os.path.join(info.module_finder.path, info.name.rpartition(".")[2])
            found += _reward_modules([folder], info.name + ".")
    return found


def _load_builtins() -> None:
    """Import every module of the package that may register a reward, once."""
    global _builtins_loaded
    if _builtins_loaded:
        return
    package = importlib.import_module("rewards")
    for module in _reward_modules(list(package.__path__), "rewards."):
        importlib.import_module(module)
    _builtins_loaded = True


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
    if name not in _FACTORIES and is_reference(name):  # path/to/file.py:name or package.module:name
        if name not in _EXTERNAL:
            try:
                _EXTERNAL[name] = resolve(name)
            except LookupError as error:
                raise UnknownRewardError(f"reward {name!r}: {error}") from None
        return _EXTERNAL[name][0]
    if name not in _FACTORIES:
        raise UnknownRewardError(
            f"unknown reward {name!r}{_did_you_mean(str(name), _FACTORIES)}available: {', '.join(sorted(_FACTORIES))}"
        )
    return _FACTORIES[name]


def get_reward(name: str, **params) -> RewardFn:
    """The reward function registered as `name`, configured with `params`."""
    factory = _lookup(name)
    accepted = inspect.signature(factory).parameters
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        listing = ", ".join(f"{key}={value!r}" for key, value in reward_parameters(name).items()) or "none"
        hint = _did_you_mean(str(unknown[0]), accepted) if len(unknown) == 1 else "; "
        names = repr(unknown[0]) if len(unknown) == 1 else str(unknown)
        raise UnknownRewardError(f"reward {name!r} has no parameter {names}{hint}its parameters: {listing}")
    function = factory(**_checked_types(factory, params))
    function.__name__ = name.rpartition(":")[2]  # TRL logs each reward under its function's name
    return function


def _accepts(hint, value) -> bool:
    """Whether `value` (as YAML gives it) fits the annotation `hint`; types this cannot judge pass."""
    if hint is typing.Any:
        return True
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return any(_accepts(arg, value) for arg in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    return True


_KINDS = {bool: "true or false", int: "a whole number", float: "a number", str: "a string"}


def _checked_types(factory, params: dict) -> dict:
    """`params`, a whole float (10000.0, what '1e4' reads as) made an int where an int is wanted; a parameter
    of the wrong type fails here with its name, not as a TypeError deep inside a reward call."""
    try:
        hints = typing.get_type_hints(factory)
    except Exception:  # an annotation this Python cannot evaluate: nothing to check against
        return params
    checked = {}
    for key, value in params.items():
        hint = hints.get(key)
        wants = typing.get_args(hint) or (hint,)
        if isinstance(value, float) and value.is_integer() and int in wants and float not in wants:
            value = int(value)
        if hint is not None and not _accepts(hint, value):
            kinds = [_KINDS[arg] for arg in wants if arg in _KINDS]
            wanted = " or ".join(kinds) + (" (or null)" if type(None) in wants else "")
            raise RewardConfigError(f"{key} {value!r} is not {wanted or hint}")
        checked[key] = value
    return checked


def _weight(value) -> float:
    """A weight as YAML gives it: a number, or a string YAML 1.1 did not read as one ('1e-3')."""
    if isinstance(value, bool):
        raise RewardConfigError(f"weight {value!r} is not a number")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise RewardConfigError(f"weight {value!r} is not a number") from None


def _build_one(index: int, spec, field: str) -> tuple[RewardFn, float]:
    """One entry of a rewards list; any mistake in it is raised naming `field[index]` and the reward."""
    if isinstance(spec, str):
        spec = {"name": spec}
    if not isinstance(spec, dict) or "name" not in spec:
        raise UnknownRewardError(
            f"{field}[{index}] = {spec!r}: expected a mapping with a 'name' key, e.g. {{name: math_accuracy, weight: 1.0}}"
        )
    params = {key: yaml_numbers(value) for key, value in spec.items()}
    name = params.pop("name")
    if not isinstance(name, str):
        raise UnknownRewardError(f"{field}[{index}]: name {name!r} is not a string; available: {available_rewards()}")
    where = f"{field}[{index}]" if name not in available_rewards() else f"{field}[{index}] ({name})"
    try:
        weight = _weight(params.pop("weight", 1.0))
        return get_reward(name, **params), weight
    except UnknownRewardError as error:
        raise type(error)(f"{where}: {error}") from None
    except (ValueError, TypeError) as error:  # RewardConfigError, and a factory's own check of its values
        raise RewardConfigError(f"{where}: {error}") from None


def build_rewards(specs: list[dict], field: str = "rewards") -> tuple[list[RewardFn], list[float]]:
    """Reward functions and weights from a YAML list of `{name, weight, **params}` entries, each guarded
    (rewards.guard: a reward that raises or returns what is not a score is named in one line, not a traceback).

    A mistake is a RewardConfigError naming the entry (`rewards[1] (overlong): ...`); `field` is the option
    the list came from.
    """
    if not isinstance(specs, list | tuple):
        raise RewardConfigError(f"{field} must be a list of {{name, weight, ...}} mappings, got {specs!r}")
    from rewards.guard import guarded

    built = [_build_one(index, spec, field) for index, spec in enumerate(specs)]
    return [guarded(function) for function, _ in built], [weight for _, weight in built]


def check_reward_specs(specs: list, field: str = "rewards") -> None:
    """Build every entry once and drop it, so that a wrong name, parameter, type or value in the config ends
    the run before anything loads (building a reward only configures it: nothing is loaded or started)."""
    build_rewards(specs, field)
