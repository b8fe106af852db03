"""Where a run's checkpoints are and which of them are whole: the one reader of `checkpoint-N` folder names.

The Trainer writes `<output_dir>/checkpoint-<global step>/` and writes trainer_state.json into it last, so a
folder without that file was cut short while being written (Ctrl-C, preemption) and is no checkpoint to resume
from; one whose weight or state files do not read to their end is damaged (`damage`), and the newest checkpoint
to resume from (`last_complete_checkpoint`) is the newest that is neither. The resume rule
(recipes.common.checkpoints.resume), the interrupt message (recipes.common.checkpoints.interrupt), the checks of a
given checkpoint (recipes.common.command_line.checks), the monitor's fallback to trainer_state.json
(recipes.common.training.monitor) and the rollback after reward hacking (resume.restore_before_divergence) all
find checkpoints through this module.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

TRAINER_STATE = "trainer_state.json"
_CHECKPOINT = re.compile(r"checkpoint-(\d+)")
logger = logging.getLogger(__name__)


def checkpoint_step(path: str | Path) -> int | None:
    """N for a folder named `checkpoint-N` (N digits only), else None."""
    match = _CHECKPOINT.fullmatch(Path(path).name)
    return int(match.group(1)) if match else None


def is_complete(checkpoint: str | Path) -> bool:
    """The Trainer writes trainer_state.json last: a checkpoint without it, or whose copy is cut short (a Ctrl-C in
    the middle of writing it left it empty, and the resume then failed in json), was cut short while being written."""
    try:
        json.loads((Path(checkpoint) / TRAINER_STATE).read_text())
    except (OSError, ValueError):
        return False
    return True


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


def last_complete_checkpoint(output_dir: str | Path, warn: bool = True) -> str | None:
    """The highest `checkpoint-N` directly in `output_dir` that was written to the end, or None.

    What this adds to transformers' `get_last_checkpoint`: that one takes the highest N even when the run was
    stopped (Ctrl-C, preemption) while writing it, and resuming from it then fails. The Trainer writes
    trainer_state.json last, so a checkpoint without it is skipped, and the one before it is taken. `warn=False`
    for a look ahead of the resume itself (finished_run), so that what was skipped is said once, by the resume.
    """
    newest, cut_short = newest_checkpoint(output_dir, depth=1)
    if cut_short is not None and warn:
        logger.warning(
            "%s was cut short while being written (its %s is missing or cut short): not resumed from",
            cut_short, TRAINER_STATE,
        )  # fmt: skip
    if newest is None:
        return None
    for checkpoint in complete_checkpoints(output_dir, up_to=newest):  # newest first
        problem = damage(checkpoint)
        if problem is None:
            return str(checkpoint)
        if warn:
            logger.warning("%s is damaged (%s): not resumed from; trying the checkpoint before it", checkpoint, problem)
    return None


def damage(checkpoint: str | Path) -> str | None:
    """What is wrong with a checkpoint's weight and state files, in words, or None when each reads to its end.

    Why: a `model.safetensors` cut short made the resume end in a safetensors traceback that named neither the
    file nor a checkpoint that would load. Read here: each safetensors file's header and the length its
    tensors need (no tensor is loaded), the zip directory at the end of each torch file (optimizer.pt,
    rng states, pytorch_model.bin), which a file cut short has lost, and trainer_state.json as JSON."""
    import zipfile

    folder = Path(checkpoint)
    for path in sorted(folder.glob("*.safetensors")):
        size = path.stat().st_size
        with path.open("rb") as handle:
            head = handle.read(8)
            length = int.from_bytes(head, "little") if len(head) == 8 else None
            if length is None or 8 + length > size:
                return f"{path.name} is cut short: {size} bytes, not even its header"
            try:
                header = json.loads(handle.read(length))
                needed = (
                    8
                    + length
                    + max(
                        (entry["data_offsets"][1] for key, entry in header.items() if key != "__metadata__"), default=0
                    )
                )
            except (ValueError, KeyError, TypeError, IndexError):
                return f"{path.name} has an unreadable header"
        if size < needed:
            return f"{path.name} is cut short: {size} of its {needed} bytes"
    for path in sorted([*folder.glob("*.pt"), *folder.glob("*.pth"), *folder.glob("*.bin")]):
        with path.open("rb") as handle:
            if handle.read(2) != b"PK":
                continue  # not a zip: an older torch format, not checked
        try:
            zipfile.ZipFile(path).close()
        except (zipfile.BadZipFile, OSError) as error:
            return f"{path.name} cannot be read ({error}): it was cut short"
    state = folder / TRAINER_STATE
    if state.is_file() and not is_complete(folder):
        return f"{TRAINER_STATE} is cut short ({state.stat().st_size} bytes that are not JSON)"
    return None


def complete_checkpoint_at_or_before(output_dir: str | Path, step: int) -> str | None:
    """The highest complete `checkpoint-N` in `output_dir` with N <= `step` (written to the end), or None."""
    earlier = [folder for folder in complete_checkpoints(output_dir) if checkpoint_step(folder) <= step]
    return str(earlier[0]) if earlier else None
