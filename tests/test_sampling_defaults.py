"""One home for the sampling defaults (eval.sampler.SamplingParams): no other number defaults a length limit.

Parameters, dataclass fields and command-line flags whose name holds `max_new_tokens` must not default to a
number literal anywhere in the packages; they take eval.sampler.DEFAULT_MAX_NEW_TOKENS (or SamplingParams
whole). The data filters' no-think probe has its own short answer budget, part of its rule
(data_filters.pass_rate.NO_THINK_ANSWER_TOKENS), not a sampling default."""

from __future__ import annotations

import ast

from tests.conftest import REPO

PACKAGES = ("eval", "tasks", "rewards", "data_filters", "recipes")


def _is_number(node) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool)


def numeric_length_defaults(source: str) -> list[int]:
    """Line numbers where a `*max_new_tokens*` parameter, field or flag defaults to a number literal."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args.args + node.args.kwonlyargs
            defaults = [None] * (len(node.args.args) - len(node.args.defaults)) + node.args.defaults
            defaults += node.args.kw_defaults
            found += [
                arg.lineno
                for arg, d in zip(args, defaults, strict=True)
                if "max_new_tokens" in arg.arg and _is_number(d)
            ]
        elif (
            isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and "max_new_tokens" in node.target.id
        ):
            value = node.value
            if isinstance(value, ast.Call):  # dataclasses.field(default=...)
                value = next((k.value for k in value.keywords if k.arg == "default"), None)
            if _is_number(value):
                found.append(node.lineno)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            name = str(node.args[0].value)
            if "max-new-tokens" in name or "max_new_tokens" in name:
                found += [node.lineno for k in node.keywords if k.arg == "default" and _is_number(k.value)]
    return found


def test_no_second_default_for_max_new_tokens():
    offenders = [
        f"{path.relative_to(REPO)}:{line}"
        for package in PACKAGES
        for path in sorted((REPO / package).rglob("*.py"))
        for line in numeric_length_defaults(path.read_text())
    ]
    assert not offenders, "a second max_new_tokens default (use eval.sampler.DEFAULT_MAX_NEW_TOKENS):\n" + "\n".join(
        offenders
    )


def test_the_check_finds_each_kind_of_default():
    source = (
        "def f(a, max_new_tokens=512): pass\n"
        "def g(*, sample_max_new_tokens: int = 64): pass\n"
        "class A:\n    max_new_tokens: int = 1024\n    eval_max_new_tokens: int = field(default=128)\n"
        "parser.add_argument('--max-new-tokens', type=int, default=4096)\n"
        "def ok(max_new_tokens=DEFAULT): pass\n"
    )
    assert numeric_length_defaults(source) == [1, 2, 4, 5, 6]


def test_the_defaults_are_the_one_constant():
    from eval.sampler import DEFAULT_MAX_NEW_TOKENS, SamplingParams
    from eval.sampling_options import SamplingOptions
    from recipes.common.traces import TraceArguments

    assert SamplingParams().max_new_tokens == DEFAULT_MAX_NEW_TOKENS
    assert SamplingOptions().max_new_tokens == DEFAULT_MAX_NEW_TOKENS
    assert TraceArguments().sampling.max_new_tokens == DEFAULT_MAX_NEW_TOKENS
