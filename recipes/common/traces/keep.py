"""The keep rule (steps 2-4 of recipes.common.traces): which of one problem's samples become training data."""

from __future__ import annotations

import json
import random

from tasks.text import normalized_text

SELECTIONS = ("random", "shortest", "best")  # best: the highest reward-model score first


def completion_key(text: str) -> str:
    """Two completions with the same key are duplicates (case, whitespace and LaTeX spacing do not count)."""
    return normalized_text(text)


def select_samples(
    samples: list[dict],
    max_per_problem: int,
    selection: str = "random",
    seed: int | str = 0,
    problem_id: str = "",
    require_correct: bool = True,
    require_stop: bool = True,
    min_score: float | None = None,
) -> list[dict]:
    """The samples of one problem that become training data, in sampling order (see the module docstring).

    `samples` are eval.runner's dicts (`text`, `correct`, `num_tokens`, `finish_reason`, and `reward_score` when
    a reward model scored them: `min_score` and `selection: best` read it; an unscored sample fails both).
    """
    if max_per_problem < 1:
        raise ValueError(f"max_per_problem must be >= 1, got {max_per_problem}")
    if selection not in SELECTIONS:
        raise ValueError(f"selection must be one of {SELECTIONS}, got {selection!r}")
    seen: set[str] = set()
    unique: list[tuple[int, dict]] = []
    for index, sample in enumerate(samples):
        if require_correct and sample.get("correct") is not True:
            continue
        if require_stop and sample.get("finish_reason") != "stop":
            continue
        score = sample.get("reward_score")
        if (min_score is not None or selection == "best") and score is None:
            continue
        if min_score is not None and score < min_score:
            continue
        text = sample.get("text")
        if not isinstance(text, str) or not text.strip():
            continue
        # with tools, a trajectory is its calls and their results too: two that end alike are not duplicates
        key = completion_key(json.dumps(sample["conversation"])) if "conversation" in sample else completion_key(text)
        if key in seen:
            continue
        seen.add(key)
        unique.append((index, sample))
    if selection == "shortest":
        chosen = sorted(unique, key=lambda item: (item[1].get("num_tokens", 0), len(item[1]["text"]), item[0]))
        chosen = chosen[:max_per_problem]
    elif selection == "best":
        chosen = sorted(unique, key=lambda item: (-item[1]["reward_score"], item[0]))[:max_per_problem]
    else:
        rng = random.Random(f"{seed}:{problem_id}")
        chosen = rng.sample(unique, min(max_per_problem, len(unique)))
    return [sample for _, sample in sorted(chosen, key=lambda item: item[0])]
