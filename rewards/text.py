"""Helpers that every reward needs: the text of a completion, whatever form TRL hands it over in."""

from __future__ import annotations


def completion_text(completion) -> str:
    """The generated text of one completion.

    TRL passes plain strings for text prompts and message lists for conversational ones
    (`[{"role": "assistant", "content": ...}]`). For a list, the assistant messages are joined. Anything
    unreadable (None, a number) becomes "" so a reward scores it as wrong instead of raising.
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        content = completion.get("content")
        return content if isinstance(content, str) else ""
    if isinstance(completion, (list, tuple)):
        parts = []
        for message in completion:
            if isinstance(message, dict) and message.get("role", "assistant") == "assistant":
                content = message.get("content")
                if isinstance(content, str):
                    parts.append(content)
        return "".join(parts)
    return ""


def column(kwargs: dict, name: str, size: int, default=None) -> list:
    """Column `name` of the batch (one value per completion), or `default` repeated when it is absent."""
    values = kwargs.get(name)
    if values is None:
        return [default] * size
    values = list(values)
    if len(values) != size:
        raise ValueError(f"column {name!r} has {len(values)} values for {size} completions")
    return values
