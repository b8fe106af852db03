"""Files the stages write for each other and for the reader, written atomically: one helper, `write_atomic`,
through which every results file goes (a run's summary.json, per_problem.jsonl, samples.jsonl, stats.json,
traces.jsonl, dataset.jsonl, run_card.json, reports; tests/test_architecture.py checks that no other write of
a file exists in the library layers, outside the few it lists with their reasons).

A crash mid-write leaves the old file or the new one, never half of one that a resumed run or a reader would
trust: the text goes to a temporary file in the same folder, which then replaces the target (a rename within a
file system is atomic). The temporary name is unique, so two processes writing the same file at once leave one
whole file.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


def write_atomic(path: str | Path, text: str | bytes) -> Path:
    """Write `text` (or bytes) to `path` atomically (creating its folder); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = tempfile.NamedTemporaryFile(
        "wb" if isinstance(text, bytes) else "w", dir=path.parent, prefix=f".{path.name}.", suffix=".tmp", delete=False
    )
    try:
        with handle:
            handle.write(text)
        os.replace(handle.name, path)
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise
    return path


def write_jsonl(path: str | Path, rows: list[dict]) -> None:
    write_atomic(path, "".join(json.dumps(row) + "\n" for row in rows))


def read_jsonl(path: str | Path) -> list[dict]:
    with Path(path).open() as handle:
        return [json.loads(line) for line in handle if line.strip()]


def write_json(path: str | Path, data: dict) -> None:
    write_atomic(path, json.dumps(data, indent=2, default=str) + "\n")


def read_json(path: str | Path) -> dict | None:
    path = Path(path)
    return json.loads(path.read_text()) if path.is_file() else None
