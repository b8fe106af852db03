"""Option values as people write them: yes/no values as rows and configs write them, numbers as YAML 1.1 leaves
them, and mapping options given as JSON on a command line. Read alike by the scorers, the row schema and every
command line, so they live in the bottom layer."""

from __future__ import annotations

import re

_YES, _NO = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")


def is_yes(value) -> bool:
    """Whether a yes/no option says yes, as a row or a config may write it: a bool, None (no), 0/1, or
    "true"/"false" text (a CSV or a hand-written JSONL), which `bool()` would read as yes whatever it says."""
    if isinstance(value, str):
        return value.strip().lower() in _YES
    return bool(value)


def is_choice(value) -> bool:
    """Whether `value` reads as a yes/no option at all (the schema reports a row whose value does not)."""
    if isinstance(value, str):
        return value.strip().lower() in (*_YES, *_NO)
    return value is None or isinstance(value, bool) or (isinstance(value, (int, float)) and value in (0, 1))


_EXPONENT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")  # only what YAML 1.1 leaves a string


def yaml_numbers(value):
    """`1e-4` means the number: PyYAML (YAML 1.1) leaves exponents without a dot as strings. Mappings and lists
    are read through; any other value is returned as it is. The reward registry and the recipes' config parser
    both read YAML written by hand, and both read numbers by this rule."""
    if isinstance(value, dict):
        return {key: yaml_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [yaml_numbers(item) for item in value]
    return float(value) if isinstance(value, str) and _EXPONENT.fullmatch(value) else value


def mapping_option(value, name: str) -> dict | None:
    """A mapping option: a dict from the YAML, or a JSON string from the command line (empty: None)."""
    import json

    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else None
        except ValueError as error:
            raise ValueError(f"{name} is not valid JSON ({error}): {value!r}") from error
    if value is not None and not isinstance(value, dict):
        raise ValueError(f"{name} must be a mapping of option names to values, got {value!r}")
    return value
