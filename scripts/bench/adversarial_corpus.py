"""The adversarial math corpus of tests/data/math_adversarial.jsonl, with its large entries built on load.
Read by the reward benchmark and by tests/test_math_adversarial.py (through tests/support/adversarial.py).

An entry holds `completion` as text, or `build` (`repeat` x `times` between `prefix` and `suffix`, or
`range_boxes`: \\boxed{1} ... \\boxed{N}) so the file stays small while the cases reach a megabyte.
`expect` is 1 (must be scored correct), 0 (a hack or a wrong answer: must score 0), "unscored" (the
verifier must return None) or "any" (only the time limit and the absence of errors are checked).
"""

from __future__ import annotations

import json
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[2] / "tests" / "data" / "math_adversarial.jsonl"


def build(spec: dict) -> str:
    if "range_boxes" in spec:
        return " ".join(f"\\boxed{{{n}}}" for n in range(1, spec["range_boxes"] + 1))
    return spec.get("prefix", "") + spec["repeat"] * spec["times"] + spec.get("suffix", "")


def load_corpus() -> list[dict]:
    rows = []
    for line in CORPUS.read_text().splitlines():
        row = json.loads(line)
        if "build" in row:
            row["completion"] = build(row.pop("build"))
        rows.append(row)
    return rows
