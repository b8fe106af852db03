"""JSON and JSON-lines files of rows and stats, written atomically: what the stages write for each other and
for the reader (traces.jsonl, dataset.jsonl, stats.json, summary.json) and what a resumed run trusts.
"""

from __future__ import annotations

import json
from pathlib import Path


def write_jsonl(path: str | Path, rows: list[dict]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")
    tmp.replace(path)  # a crash mid-write leaves no half file that a resumed run would trust


def read_jsonl(path: str | Path) -> list[dict]:
    with Path(path).open() as handle:
        return [json.loads(line) for line in handle if line.strip()]


def write_json(path: str | Path, data: dict) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    tmp.replace(path)


def read_json(path: str | Path) -> dict | None:
    path = Path(path)
    return json.loads(path.read_text()) if path.is_file() else None
