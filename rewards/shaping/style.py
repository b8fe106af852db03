"""Reward shaping on length, repetition and language, added to the correctness reward with weights.

* `overlong`: DAPO's soft overlong punishment (Yu et al. 2025, "DAPO", eq. 13), on token counts;
* `length_penalty`: a linear cost per token, minus the completion's length (the entry's `weight` is the cost
  of one token, lambda): the plain length penalty whose effect per difficulty scripts/bench/length_penalty.py
  measures;
* `kimi_length`: Kimi k1.5's length reward (Kimi Team 2025, section 2.3.3), per prompt group;
* `cosine`: the cosine length-scaled correctness reward of Yeo et al. 2025 ("Demystifying Long
  Chain-of-Thought Reasoning in LLMs");
* `repetition`: a penalty on repeated word n-grams (also from Yeo et al.);
* `language_consistency`: DeepSeek-R1's language-consistency reward, the share of the reasoning's
  words written in the target language, by Unicode script (no language-detection dependency).

Token counts come from TRL's `completion_ids`; when a caller does not pass them, character counts
stand in and a warning says so once.
"""

from __future__ import annotations

import logging
import math
import re
import unicodedata
from collections import defaultdict

from rewards.math import THINK_CLOSE, THINK_OPEN, row_require_number, verify_batch
from rewards.registry import register
from rewards.text import column, completion_text

logger = logging.getLogger(__name__)
_warned: set[str] = set()


def _warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        logger.warning(message)


def completion_lengths(completions, kwargs: dict, reward: str) -> list[int]:
    """Token counts from `completion_ids`; character counts (with a one-time warning) without them."""
    ids = kwargs.get("completion_ids")
    if ids is not None:
        return [len(tokens) for tokens in ids]
    _warn_once(reward, f"{reward}: no completion_ids given (TRL passes them); measuring length in characters")
    return [len(completion_text(completion)) for completion in completions]


def correctness(completions, kwargs: dict, reward: str) -> list[bool | None]:
    """Whether each completion is correct, by the math verifier; None where the row has no gold answer."""
    answers = kwargs.get("answer")
    if answers is None:
        _warn_once(reward + ":answer", f"{reward}: rows have no 'answer' column; correctness unknown")
        return [None] * len(completions)
    texts = [completion_text(completion) for completion in completions]
    ids, literal = column(kwargs, "id", len(texts)), row_require_number(kwargs, len(texts))
    return [verdict.correct for verdict in verify_batch(list(answers), texts, ids, require_number=literal)]


# ---------------------------------------------------------------- DAPO overlong


def overlong_penalty(length: int, max_len: int, buffer: int) -> float:
    """0 up to max_len - buffer, then falling linearly to -1 at max_len, and -1 beyond."""
    safe = max_len - buffer
    if length <= safe:
        return 0.0
    if length <= max_len:
        return (safe - length) / buffer
    return -1.0


@register("overlong")
def make_overlong(max_len: int = 4096, buffer: int = 1024):
    """DAPO soft overlong punishment. DAPO used max_len 20480 with buffer 4096 (punishment from 16384)."""
    if not 0 < buffer <= max_len:
        raise ValueError(f"overlong needs 0 < buffer <= max_len, got buffer={buffer}, max_len={max_len}")

    def overlong(completions, **kwargs) -> list[float]:
        return [overlong_penalty(n, max_len, buffer) for n in completion_lengths(completions, kwargs, "overlong")]

    return overlong


# ---------------------------------------------------------------- linear length


@register("length_penalty")
def make_length_penalty(free_tokens: int = 0):
    """Minus the completion's token count past `free_tokens`, for every completion, right or wrong: with the
    entry's `weight` lambda, accuracy - lambda x length. No reward of the registry is linear in length (overlong
    is 0 up to its buffer, kimi_length and cosine depend on correctness and the group), and a linear cost is
    the one whose trade is easiest to read: a completion that saves n tokens gains lambda x n whatever it
    answers, so a problem is worth working only while its chance of being right exceeds lambda x its length."""
    if free_tokens < 0:
        raise ValueError(f"length_penalty needs free_tokens >= 0, got {free_tokens}")

    def length_penalty(completions, **kwargs) -> list[float]:
        lengths = completion_lengths(completions, kwargs, "length_penalty")
        return [-float(max(0, length - free_tokens)) for length in lengths]

    return length_penalty


# ---------------------------------------------------------------- Kimi k1.5 length


def kimi_length_rewards(lengths: list[int], correct: list[bool | None]) -> list[float | None]:
    """One group's rewards: lambda = 0.5 - (len - min) / (max - min); correct -> lambda, wrong -> min(0, lambda)."""
    shortest, longest = min(lengths), max(lengths)
    rewards: list[float | None] = []
    for length, ok in zip(lengths, correct, strict=True):
        if ok is None:
            rewards.append(None)
        elif longest == shortest:
            rewards.append(0.0)
        else:
            factor = 0.5 - (length - shortest) / (longest - shortest)
            rewards.append(factor if ok else min(0.0, factor))
    return rewards


@register("kimi_length")
def make_kimi_length():
    """Kimi k1.5's length reward. Groups are the completions of the same row (by `id`, else by prompt)
    within the batch a process scores."""

    def kimi_length(completions, **kwargs) -> list[float | None]:
        lengths = completion_lengths(completions, kwargs, "kimi_length")
        correct = correctness(completions, kwargs, "kimi_length")
        ids, prompts = column(kwargs, "id", len(completions)), column(kwargs, "prompts", len(completions))
        groups: dict[str, list[int]] = defaultdict(list)
        for index in range(len(completions)):
            groups[str(ids[index]) if ids[index] is not None else repr(prompts[index])].append(index)
        rewards: list[float | None] = [None] * len(completions)
        for members in groups.values():
            scores = kimi_length_rewards([lengths[i] for i in members], [correct[i] for i in members])
            for index, score in zip(members, scores, strict=True):
                rewards[index] = score
        return rewards

    return kimi_length


# ---------------------------------------------------------------- cosine


def cosine_interpolate(length: int, max_len: int, at_zero: float, at_max: float) -> float:
    """at_max + (at_zero - at_max) * (1 + cos(pi * length / max_len)) / 2: at_zero for length 0, at_max at max_len."""
    return at_max + 0.5 * (at_zero - at_max) * (1.0 + math.cos(math.pi * min(length, max_len) / max_len))


@register("cosine")
def make_cosine(
    max_len: int = 4096,
    correct_short: float = 1.0,
    correct_long: float = 0.5,
    wrong_short: float = -1.0,
    wrong_long: float = -0.5,
    exceed: float = -1.0,
):
    """Correctness scaled by length on a cosine: short correct answers earn most, short wrong ones lose most
    (so the model keeps thinking when unsure). Yeo et al. used 2, 1, -10, 0 and -10 for these values."""

    def cosine(completions, **kwargs) -> list[float | None]:
        lengths = completion_lengths(completions, kwargs, "cosine")
        rewards: list[float | None] = []
        for length, ok in zip(lengths, correctness(completions, kwargs, "cosine"), strict=True):
            if ok is None:
                rewards.append(None)
            elif length > max_len:
                rewards.append(exceed)
            elif ok:
                rewards.append(cosine_interpolate(length, max_len, correct_short, correct_long))
            else:
                rewards.append(cosine_interpolate(length, max_len, wrong_short, wrong_long))
        return rewards

    return cosine


# ---------------------------------------------------------------- repetition

_WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def repetition_fraction(text: str, ngram_size: int) -> float:
    """The share of word n-grams that repeat an earlier one: 0 for none, close to 1 for a loop."""
    words = _WORD.findall(text.lower())
    if len(words) < ngram_size:
        return 0.0
    ngrams = [tuple(words[i : i + ngram_size]) for i in range(len(words) - ngram_size + 1)]
    return 1.0 - len(set(ngrams)) / len(ngrams)


@register("repetition")
def make_repetition(ngram_size: int = 3, max_penalty: float = -1.0):
    """max_penalty times the share of repeated n-grams (0 for a text without repeats)."""
    if max_penalty > 0:
        raise ValueError(f"max_penalty is a penalty and must be <= 0, got {max_penalty}")

    def repetition(completions, **kwargs) -> list[float]:
        return [max_penalty * repetition_fraction(completion_text(c), ngram_size) for c in completions]

    return repetition


# ---------------------------------------------------------------- language consistency

# Unicode script (first word of a character's name) of the letters each language is written in.
SCRIPTS = {
    "en": {"LATIN"}, "fr": {"LATIN"}, "de": {"LATIN"}, "es": {"LATIN"}, "it": {"LATIN"}, "pt": {"LATIN"},
    "zh": {"CJK"}, "ja": {"CJK", "HIRAGANA", "KATAKANA"}, "ko": {"HANGUL"},
    "ru": {"CYRILLIC"}, "uk": {"CYRILLIC"}, "ar": {"ARABIC"}, "hi": {"DEVANAGARI"}, "el": {"GREEK"},
}  # fmt: skip
_HAN_OR_KANA = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff]")


def _script(char: str) -> str:
    try:
        return unicodedata.name(char).split(" ", 1)[0]
    except ValueError:  # unnamed code point
        return "UNKNOWN"


def language_share(text: str, language: str) -> float:
    """Share of the words with letters whose letters are all in `language`'s script. Han and kana
    characters count one word each (those scripts put no spaces between words)."""
    scripts = SCRIPTS[language]
    words = _HAN_OR_KANA.sub(lambda match: f" {match.group()} ", text).split()
    counted = in_language = 0
    for word in words:
        letters = [char for char in word if char.isalpha()]
        if not letters:
            continue  # numbers and formulas belong to no language
        counted += 1
        in_language += all(_script(char) in scripts for char in letters)
    return in_language / counted if counted else 1.0


@register("language_consistency")
def make_language_consistency(language: str = "en", reasoning_only: bool = True):
    """DeepSeek-R1's language-consistency reward: the share of the reasoning (the text before `</think>`,
    or all of it) written in `language`. An empty completion scores 0."""
    if language not in SCRIPTS:
        raise ValueError(f"unknown language {language!r}; known: {', '.join(sorted(SCRIPTS))}")

    def language_consistency(completions, **kwargs) -> list[float]:
        scores = []
        for completion in completions:
            text = completion_text(completion)
            if reasoning_only and THINK_CLOSE in text:
                text = text.split(THINK_CLOSE, 1)[0]
            text = text.replace(THINK_OPEN, " ").replace(THINK_CLOSE, " ")
            scores.append(language_share(text, language) if text.strip() else 0.0)
        return scores

    return language_consistency
