"""Rewards from outside the repository: `path/to/file.py:name` or `package.module:name`, wherever a reward's
name goes (a rewards list, gold_rewards, a row's or a data option's `verifier`).

At db84883 a reward had to be a module inside this repository's `rewards/`: a researcher's own verifier could
not be named from their config, nor score an evaluation. Here `name` is, in the module:
- a factory registered with `@rewards.register("name", accuracy=...)` (parameters from the YAML entry; an
  accuracy reward can also be a verifier: evaluation, the pass-rate filter, rejection sampling);
- or any callable: a reward in TRL's form (first parameter `completions`), taken as it is, with no
  parameters; otherwise a factory of one. Set `accuracy = True` on it to make it an accuracy reward.
A file is imported from its path (anywhere); a dotted module must be importable (installed, or on
PYTHONPATH). What a user's module registers stays its own (named through the module, so it clashes with no
built-in name); the reference is registered under its full text, and each module is imported once.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import sys
from pathlib import Path


def is_reference(name) -> bool:
    """`where:name` with both parts: a reward from outside the built-in registry."""
    if not isinstance(name, str) or ":" not in name:
        return False
    where, _, attr = name.rpartition(":")
    return bool(where) and attr.isidentifier()


# While a user's module is imported, `rewards.register` records its rewards here, by their own names, instead of
# in the registry: they are named through their module, and clash with nothing of ours.
capturing: dict | None = None


def _import(where: str):
    """The module, with the rewards it registered (by their own names) as `__rlvr_rewards__`."""
    global capturing
    before, capturing = capturing, {}
    try:
        module = _load(where)
        if not hasattr(module, "__rlvr_rewards__"):
            module.__rlvr_rewards__ = capturing
    finally:
        capturing = before
    return module


def _load(where: str):
    if where.endswith(".py") or "/" in where:
        path = Path(where).expanduser().resolve()
        if not path.is_file():
            raise ImportError(f"no such file {str(path)!r}")
        digest = hashlib.sha1(str(path).encode()).hexdigest()[:10]
        module_name = f"rlvr_user_rewards.{path.stem}_{digest}"
        if module_name in sys.modules:
            return sys.modules[module_name]
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[module_name]
            raise
        return module
    return importlib.import_module(where)


def resolve(reference: str) -> tuple[object, bool]:
    """(the factory, whether it is an accuracy reward) that `reference` names; LookupError saying why not."""
    where, _, attr = reference.rpartition(":")
    try:
        module = _import(where)
    except Exception as error:  # noqa: BLE001 - whatever importing the user's module raised, say it in one line
        raise LookupError(f"cannot import {where!r}: {type(error).__name__}: {error}") from None
    if attr in module.__rlvr_rewards__:  # registered there under this name
        return module.__rlvr_rewards__[attr]
    found = getattr(module, attr, None)
    if not callable(found):
        names = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        raise LookupError(f"{where!r} has no function {attr!r}; its functions: {', '.join(names) or 'none'}")
    accuracy = bool(getattr(found, "accuracy", False))
    try:
        first = next(iter(inspect.signature(found).parameters), None)
    except (TypeError, ValueError):
        first = None
    if first == "completions":  # a reward itself: a factory of no parameters gives it

        def factory():
            return found

        return factory, accuracy
    return found, accuracy
