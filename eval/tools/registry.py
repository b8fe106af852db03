"""Tool names: the built-in `python`, or a user's own tool as `path/to/file.py:function` (or `package.module:name`),
wherever a tool's name goes, as a user's own rewards are named (rewards/external.py).

A tool is what TRL's GRPOTrainer takes: a function (for `tools=`) with typed arguments, a typed return and a
Google-style docstring, from which the schema the model sees is built; or an environment class (for
`environment_factory=`): one instance per trajectory, `reset(**row)` before it, its other public methods the
tools. The built-in `python` is such a class (eval/tools/python.py), since its session lives as long as one
trajectory; a user's own file may hold either.

A user's file is imported by `rewards.external.resolve`, the one loader of a user's code, so a file that holds both
rewards and tools is imported once. It reads a function whose first parameter is `completions` as a reward, so a
tool's first parameter must have another name. Each tool's schema is built when it is resolved, so a missing type
or docstring is said when the config is read, not in the middle of training.
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable, Sequence

from basics.did_you_mean import did_you_mean
from eval.tools.python import PythonEnvironment
from rewards import external

BUILT_IN: dict[str, Callable] = {"python": PythonEnvironment}
RESERVED_METHODS = ("reset", "get_reward")  # an environment's methods that TRL does not make tools of


def tool_names() -> list[str]:
    """The built-in tools' names."""
    return sorted(BUILT_IN)


def is_environment(tool) -> bool:
    """Whether `tool` is an environment (a class, or a partial of one, with `reset`) rather than a plain function."""
    target = tool.func if isinstance(tool, functools.partial) else tool
    return inspect.isclass(target) and callable(getattr(target, "reset", None))


def resolve_tool(name: str, **python_options) -> Callable:
    """The tool `name` names: the built-in `python` (an environment class, or a factory of it with
    `python_options`: timeout_s, memory_mb, max_output_chars, ...), or a user's function or environment class.
    ValueError, naming the known tools, for a name that is neither."""
    if not isinstance(name, str):
        raise ValueError(f"a tool's name is a string, not {type(name).__name__}: {name!r}")
    name = name.strip()
    if name in BUILT_IN:
        tool = BUILT_IN[name]
        return functools.partial(tool, **python_options) if python_options else tool
    if not external.is_reference(name):
        hint = did_you_mean([name], BUILT_IN)
        raise ValueError(
            f"unknown tool {name!r}{'; ' + hint if hint else ''}. The built-in tools: {', '.join(tool_names())}; "
            "or your own, named as path/to/file.py:function (or package.module:function)"
        )
    try:
        tool, _ = external.resolve(name)
    except LookupError as error:
        raise ValueError(f"tool {name!r}: {error}") from None
    check_schema(tool, name)
    return tool


def check_schema(tool, name: str) -> None:
    """ValueError unless TRL can show `tool` (each tool method of an environment) to the model: typed arguments,
    a typed return and a Google-style docstring describing each argument."""
    from transformers.utils import get_json_schema

    if is_environment(tool):
        cls = tool.func if isinstance(tool, functools.partial) else tool
        methods = [
            (method_name, types.MethodType(function, object()))  # bound, so that `self` is not an argument
            for method_name, function in inspect.getmembers(cls, predicate=inspect.isfunction)
            if not method_name.startswith("_") and method_name not in RESERVED_METHODS
        ]
        if not methods:
            raise ValueError(f"tool {name!r}: the environment {cls.__name__} has no public method to call as a tool")
    else:
        methods = [(getattr(tool, "__name__", name), tool)]
    for method_name, method in methods:
        try:
            get_json_schema(method)
        except Exception as error:  # noqa: BLE001 - transformers' schema errors have several types
            raise ValueError(
                f"tool {name!r}: {method_name} cannot be shown to the model ({error}). A tool needs a type on "
                "each argument and on its return, and a Google-style docstring with an Args: entry per argument."
            ) from None


def trainer_tools(names: Sequence[str], **python_options) -> dict:
    """GRPOTrainer's keyword arguments for the tools `names`: `tools` (the functions) and `environment_factory`
    (the one environment, or None). TRL gives each rollout one environment instance, so at most one name may be an
    environment."""
    resolved = [(name, resolve_tool(name, **python_options)) for name in names]
    environments = [name for name, tool in resolved if is_environment(tool)]
    if len(environments) > 1:
        raise ValueError(
            f"tools {environments} are each an environment (a session per trajectory); TRL gives a rollout one "
            "environment, so name at most one of them"
        )
    return {
        "tools": [tool for _, tool in resolved if not is_environment(tool)],
        "environment_factory": next((tool for _, tool in resolved if is_environment(tool)), None),
    }
