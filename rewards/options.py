"""Row options every scorer reads alike: the `require_number` column and yes/no values as rows write them.

Kept apart from rewards.verdicts so the math verifier (which reads them) and the verdicts (which call the math
verifier) do not import each other."""

from __future__ import annotations

# A math row's column that asks for a number literal where its gold is a number (rewards.math.literal).
REQUIRE_NUMBER = "require_number"
_YES, _NO = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")


def choice_of(value) -> bool:
    """A yes/no option as a row or a config may write it: a bool, None (no), 0/1, or "true"/"false" text
    (a CSV or a hand-written JSONL), which `bool()` would read as yes whatever it says."""
    if isinstance(value, str):
        return value.strip().lower() in _YES
    return bool(value)


def is_choice(value) -> bool:
    """Whether `value` reads as a yes/no option at all (the schema reports a row whose value does not)."""
    if isinstance(value, str):
        return value.strip().lower() in (*_YES, *_NO)
    return value is None or isinstance(value, bool) or (isinstance(value, (int, float)) and value in (0, 1))
