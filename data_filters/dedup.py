"""Duplicate questions: exact copies, and copies that differ only in case, spacing or LaTeX dressing.

A duplicated problem is drawn twice as often by GRPO's sampler, weighs twice in SFT, and splits its pass
rate over two ids. Two keys, both cheap enough for millions of rows (one dictionary lookup per row):

- `exact`: the question text as it is;
- `normalized`: NFKC, case-folded, `$` and LaTeX spacing (`\\,`, `\\quad`, `\\left`/`\\right`) removed,
  then every run of whitespace removed ("x + 1" and "x+1" are the same question).

The first occurrence is kept; a later copy is dropped (or tagged with `duplicate_of`, the id it repeats).
Copies whose gold answers differ are counted apart (`conflicting answers`): one of the two is wrong,
and keeping the first is a guess the report makes visible.
"""

from __future__ import annotations

import logging
import time

from data_filters.report import StepReport, check_mode, without_rows
from tasks.rows import question_text, set_column
from tasks.text import normalized_text

logger = logging.getLogger(__name__)

KEYS = ("exact", "normalized")


def duplicate_groups(texts: list[str], key: str = "normalized") -> list[int | None]:
    """For each text, the index of the first earlier text with the same key, or None for a first occurrence."""
    if key not in KEYS:
        raise ValueError(f"dedup key must be one of {KEYS}, got {key!r}")
    first_seen: dict[str, int] = {}
    result: list[int | None] = []
    for index, text in enumerate(texts):
        value = text if key == "exact" else normalized_text(text)
        original = first_seen.setdefault(value, index)
        result.append(None if original == index else original)
    return result


def deduplicate(dataset, key: str = "normalized", mode: str = "drop", question_field: str = "problem"):
    """Drop (or tag with `duplicate_of`) rows whose question repeats an earlier row's. Returns `(dataset, StepReport)`."""
    check_mode(mode, "dedup")
    started = time.perf_counter()
    columns = [c for c in ("prompt", "messages", question_field) if c in dataset.column_names]
    texts = [question_text(row, question_field) for row in dataset.select_columns(columns)]
    originals = duplicate_groups(texts, key)
    exact = duplicate_groups(texts, "exact") if key == "normalized" else originals
    answers = dataset["answer"] if "answer" in dataset.column_names else [None] * len(dataset)
    ids = dataset["id"] if "id" in dataset.column_names else [str(index) for index in range(len(dataset))]
    flagged = [index for index, original in enumerate(originals) if original is not None]
    conflicting = sum(1 for index in flagged if str(answers[index]).strip() != str(answers[originals[index]]).strip())
    exact_count = sum(1 for index in flagged if exact[index] is not None)
    reasons = {}
    if exact_count:
        reasons["exact duplicate"] = exact_count
    if len(flagged) - exact_count:
        reasons["same text after normalisation"] = len(flagged) - exact_count
    if mode == "drop":
        result = without_rows(dataset, flagged)
    else:
        repeats = [None if original is None else ids[original] for original in originals]
        result = set_column(dataset, "duplicate_of", repeats, "string")
    examples = [{"row": index, "id": ids[index], "duplicate_of": ids[originals[index]]} for index in flagged[:20]]
    details = {"key": key, "conflicting answers": conflicting, "examples": examples}
    report = StepReport.timed("dedup", dataset, result, mode, len(flagged), reasons, started, details=details)
    logger.info("dedup (%s): %d of %d rows repeat an earlier row", key, len(flagged), len(dataset))
    return result, report
