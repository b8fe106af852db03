"""data_filters/dedup.py: exact and normalised duplicates, first occurrence kept, conflicts counted; on the real
MATH training set against a brute-force pairwise comparison."""

from __future__ import annotations

import json
import unicodedata

import pytest
from datasets import Dataset

from data_filters.dedup import deduplicate, duplicate_groups
from tasks.text import normalized_text


def test_keys():
    texts = [
        "Find $x+1$.",
        "Find $x+1$.",
        "find  $x + 1$ .",
        "Find \\left( x+1 \\right).",
        "Find (x+1).",
        "Find $x-1$.",
    ]
    assert duplicate_groups(texts, "exact") == [None, 0, None, None, None, None]
    assert duplicate_groups(texts, "normalized") == [None, 0, 0, None, 3, None]
    assert normalized_text("A\u00a0 B\n\\,C") == normalized_text("a b c") == "abc"
    with pytest.raises(ValueError, match="dedup key"):
        duplicate_groups(texts, "fuzzy")


def test_drop_and_tag_with_reasons_and_conflicts():
    rows = [
        {"id": "a", "problem": "What is 2+2?", "answer": "4"},
        {"id": "b", "problem": "What is 2+2?", "answer": "4"},  # exact copy
        {"id": "c", "problem": "what is 2 + 2 ?", "answer": "5"},  # normalised copy, other answer
        {"id": "d", "problem": "What is 3+3?", "answer": "6"},
    ]
    kept, report = deduplicate(Dataset.from_list(rows))
    assert kept["id"] == ["a", "d"]
    assert report.reasons == {"exact duplicate": 1, "same text after normalisation": 1}
    assert report.details["conflicting answers"] == 1
    tagged, report = deduplicate(Dataset.from_list(rows), key="exact", mode="tag")
    assert tagged["duplicate_of"] == [None, "a", None, None] and report.rows_out == 4 and report.flagged == 1


def test_math_train_against_brute_force(shared_math_data):
    rows = [json.loads(line) for line in (shared_math_data / "math_train.jsonl").read_text().splitlines()]
    texts = [row["problem"] for row in rows]

    # the same key written independently (str.replace, no regex), and every pair of rows compared through a sort
    def key(text: str) -> str:
        text = unicodedata.normalize("NFKC", text).casefold()
        for command in (
            "\\left",
            "\\right",
            "\\displaystyle",
            "\\qquad",
            "\\quad",
            "\\,",
            "\\;",
            "\\:",
            "\\!",
            "\\ ",
            "$",
        ):
            text = text.replace(command, "")
        return "".join(text.split())

    keys = [key(text) for text in texts]
    order = sorted(range(len(keys)), key=lambda index: (keys[index], index))
    expected = {b for a, b in zip(order, order[1:], strict=False) if keys[a] == keys[b]}
    dataset = Dataset.from_list(
        [{"problem": text, "answer": row["answer"]} for text, row in zip(texts, rows, strict=True)]
    )
    kept, report = deduplicate(dataset)
    assert report.flagged == len(expected) and len(kept) == len(rows) - len(expected)
    print(f"math_train: {report.flagged} normalised duplicates, {report.reasons}")


def test_the_shared_drop_rule_and_step_report():
    """What every filter step returns in drop mode (the rows not flagged, in order) and its timed report."""
    import time

    from data_filters.report import StepReport, without_rows

    dataset = Dataset.from_list([{"id": str(i)} for i in range(6)])
    result = without_rows(dataset, [4, 1, 4])
    assert result["id"] == ["0", "2", "3", "5"]
    assert without_rows(dataset, {})["id"] == dataset["id"]
    started = time.perf_counter()
    report = StepReport.timed("dedup", dataset, result, "drop", 2, {"exact duplicate": 2}, started, details={"k": 1})
    assert (report.rows_in, report.rows_out, report.dropped, report.flagged) == (6, 4, 2, 2)
    assert report.reasons == {"exact duplicate": 2} and report.details == {"k": 1} and report.files == []
    assert 0 <= report.seconds < 60
