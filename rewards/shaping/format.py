"""Format rewards for R1-style completions: reasoning inside `<think>...</think>`, then the answer.

Many chat templates (DeepSeek-R1 distills, Qwen3 in thinking mode) end the generation prompt with
`<think>\\n`, so the completion itself starts inside the reasoning and contains only `</think>`. A format
reward that demands an opening tag then scores 0 on every completion of such a model (open-r1's does).
Here the opening tag is expected, forbidden or either, by `think_prefilled`:

* True: the template writes `<think>`; the completion must not repeat it;
* False: the completion must open with `<think>`;
* None (default): a plain-text prompt that ends in `<think>` means pre-filled, for that row; for chat
  prompts, whose rendering the reward cannot see, either form is accepted.
"""

from __future__ import annotations

import re

from rewards.math import THINK_CLOSE, THINK_OPEN, boxed_answers
from rewards.registry import register
from rewards.text import column, completion_text

_STRICT = re.compile(r"\A<think>\n(?P<reasoning>.*?\S.*?)\n</think>\n(?P<answer>.*\S.*)\Z", re.DOTALL)
_STRICT_PREFILLED = re.compile(r"\A(?P<reasoning>.*?\S.*?)\n</think>\n(?P<answer>.*\S.*)\Z", re.DOTALL)


def _prefilled_rows(think_prefilled: bool | None, prompts: list) -> list[bool | None]:
    if think_prefilled is not None:
        return [think_prefilled] * len(prompts)
    return [prompt.rstrip().endswith(THINK_OPEN) if isinstance(prompt, str) else None for prompt in prompts]


def _opening_ok(text: str, prefilled: bool | None) -> bool:
    opens = text.count(THINK_OPEN)
    starts_open = text.lstrip().startswith(THINK_OPEN)
    if prefilled is True:
        return opens == 0
    if prefilled is False:
        return opens == 1 and starts_open
    return opens == 0 or (opens == 1 and starts_open)


def check_format(text: str, prefilled: bool | None, strict: bool, require_boxed: bool) -> bool:
    """Does one completion follow the think-then-answer format?"""
    if text.count(THINK_CLOSE) != 1 or not _opening_ok(text, prefilled):
        return False
    if strict:
        opened = text.startswith(THINK_OPEN)
        match = (_STRICT if opened else _STRICT_PREFILLED).match(text)
        if match is None:
            return False
        reasoning, answer = match.group("reasoning"), match.group("answer")
    else:
        before, _, answer = text.partition(THINK_CLOSE)
        reasoning = before.replace(THINK_OPEN, "", 1)
        if not reasoning.strip() or not answer.strip():
            return False
    return bool(boxed_answers(answer)) if require_boxed else True


@register("think_format")
def make_think_format(strict: bool = False, think_prefilled: bool | None = None, require_boxed: bool = True):
    """1.0 when the completion reasons inside the think tags and then answers (with a \\\\boxed answer when
    `require_boxed`), else 0.0. `strict` also fixes the layout: `<think>\\n...\\n</think>\\n<answer>`."""

    def think_format(completions, **kwargs) -> list[float]:
        prompts = column(kwargs, "prompts", len(completions))
        rows = _prefilled_rows(think_prefilled, prompts)
        return [
            float(check_format(completion_text(completion), prefilled, strict, require_boxed))
            for completion, prefilled in zip(completions, rows, strict=True)
        ]

    return think_format


@register("tag_count")
def make_tag_count(think_prefilled: bool | None = None):
    """Partial credit, a third each: the opening tag is right (or rightly absent), exactly one `</think>`,
    and some answer after it. A denser signal than `think_format` early in training."""

    def tag_count(completions, **kwargs) -> list[float]:
        prompts = column(kwargs, "prompts", len(completions))
        scores = []
        for completion, prefilled in zip(completions, _prefilled_rows(think_prefilled, prompts), strict=True):
            text = completion_text(completion)
            if not text.strip():
                scores.append(0.0)
                continue
            closing = text.count(THINK_CLOSE) == 1
            answered = closing and bool(text.partition(THINK_CLOSE)[2].strip())
            scores.append((_opening_ok(text, prefilled) + closing + answered) / 3)
        return scores

    return tag_count
