"""STaR's rationalisation (Zelikman et al. 2022): the gold answer given as a hint, and the rationales that must
not quote it."""

from __future__ import annotations

from recipes.common.traces.keep import completion_key

DEFAULT_HINT = "\n\nHint: the answer is {answer}."


def add_answer_hint(prompt: list[dict], answer: str, template: str = DEFAULT_HINT) -> list[dict]:
    """A copy of `prompt` whose last user message ends with the gold answer as a hint (STaR's rationalisation)."""
    if "{answer}" not in template:
        raise ValueError(f"hint_template must contain '{{answer}}', got {template!r}")
    hint = template.replace("{answer}", str(answer))  # replace, not format: answers hold LaTeX braces
    messages = [dict(message) for message in prompt]
    for message in reversed(messages):
        if message.get("role") == "user":
            message["content"] = f"{message['content']}{hint}"
            return messages
    raise ValueError("the prompt has no user message to add the hint to")


def mentions_hint(text: str, answer: str, template: str = DEFAULT_HINT) -> bool:
    """True when a rationale quotes the hint: it would teach the model to cite a hint it will not be given."""
    hint = template.replace("{answer}", str(answer)).strip()
    return bool(hint) and completion_key(hint) in completion_key(text)
