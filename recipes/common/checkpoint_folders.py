"""Where a run's checkpoints are and which of them are whole: the one reader of `checkpoint-N` folder names.

The Trainer writes `<output_dir>/checkpoint-<global step>/` and writes trainer_state.json into it last, so a
folder without that file was cut short while being written (Ctrl-C, preemption) and is no checkpoint to resume
from. The resume rule (recipes.common.checkpoints), the interrupt message (recipes.common.interrupt) and the
monitor's fallback to trainer_state.json (recipes.common.monitor) all find checkpoints through this module.
"""

from __future__ import annotations

import re
from pathlib import Path

TRAINER_STATE = "trainer_state.json"
_CHECKPOINT = re.compile(r"checkpoint-(\d+)")


def checkpoint_step(path: str | Path) -> int | None:
    """N for a folder named `checkpoint-N` (N digits only), else None."""
    match = _CHECKPOINT.fullmatch(Path(path).name)
    return int(match.group(1)) if match else None


def is_complete(checkpoint: str | Path) -> bool:
    """The Trainer writes trainer_state.json last: a checkpoint without it was cut short while being written."""
    return (Path(checkpoint) / TRAINER_STATE).is_file()


def checkpoint_folders(output_dir: str | Path) -> list[Path]:
    """Every `checkpoint-N` folder directly in `output_dir`, complete or not, by N."""
    folders = [
        path for path in Path(output_dir).glob("checkpoint-*") if path.is_dir() and checkpoint_step(path) is not None
    ]
    return sorted(folders, key=checkpoint_step)


def complete_checkpoints(output_dir: str | Path, up_to: Path | None = None) -> list[Path]:
    """The complete `checkpoint-N` folders directly in `output_dir`, newest first (those after `up_to` left out)."""
    limit = checkpoint_step(up_to) if up_to is not None else None
    found = [folder for folder in checkpoint_folders(output_dir) if is_complete(folder)]
    return [folder for folder in reversed(found) if limit is None or checkpoint_step(folder) <= limit]


def newest_checkpoint(output_dir: str | Path, depth: int = 3) -> tuple[Path | None, Path | None]:
    """(the newest complete `checkpoint-N` of a run, a newer one left incomplete by an interruption or None).

    The highest N directly in `output_dir` wins (what `--resume_from_checkpoint true` takes); otherwise the
    most recently written one below it (up to `depth` folders down), as a multi-stage recipe saves each stage's
    checkpoints in its own folder (rejection sampling's rounds, distillation's student).
    """
    root = Path(output_dir)
    if not root.is_dir():
        return None, None
    ordered = checkpoint_folders(root)
    if not ordered:
        nested = [
            path
            for level in range(2, depth + 1)
            for path in root.glob("/".join(["*"] * level))
            if path.is_dir() and checkpoint_step(path) is not None
        ]
        ordered = sorted(nested, key=lambda path: path.stat().st_mtime)
    done = [index for index, path in enumerate(ordered) if is_complete(path)]
    newest = ordered[done[-1]] if done else None
    cut_short = ordered[-1] if ordered and not is_complete(ordered[-1]) else None
    return newest, cut_short
