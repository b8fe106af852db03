"""What a user is told about stopping a run and resuming it.

Why: Ctrl-C in the middle of training used to end in a traceback of a hundred lines that never said the run
can continue; and the resumed run of a model whose output layer shares the embeddings' tensor (the tiny
model, SmolLM2, Qwen2.5's small models) warned that `lm_head.weight` was missing from the checkpoint, which
reads like lost weights although a checkpoint stores a shared tensor once. `interrupted_message` says where
the last checkpoint is and how to continue; `TiedWeightsNote` turns that warning into a note when every
"missing" key is a parameter tied to one that was loaded.
"""

from __future__ import annotations

import ast
import logging
import re
import weakref
from pathlib import Path

from recipes.common.checkpoints.folders import newest_checkpoint

INTERRUPTED_EXIT_CODE = 130  # 128 + SIGINT, what a shell reports for a command stopped by Ctrl-C


def interrupted_message(training_args) -> str:
    """The line printed when the user stops a run: the last checkpoint and the command that continues from it."""
    output_dir = getattr(training_args, "output_dir", None)
    if not output_dir:
        return "interrupted"
    checkpoint, cut_short = newest_checkpoint(output_dir)
    prefix = "interrupted"
    if cut_short is not None:  # `true` would pick it up and fail: name the complete one instead
        prefix = f"interrupted while {cut_short} was being written (it is incomplete: delete it)"
    if checkpoint is not None:
        direct = checkpoint.parent == Path(output_dir)
        how = f"{checkpoint}" if cut_short is not None else "true" + (" (or that path)" if direct else "")
        return (
            f"{prefix}; the last checkpoint is {checkpoint}: rerun the same command with "
            f"--resume_from_checkpoint {how} to continue"
        )
    strategy = getattr(training_args, "save_strategy", None)
    if str(getattr(strategy, "value", strategy)) == "no":
        how = "checkpoints are off (save_strategy: no); set --save_strategy steps --save_steps N to be able to resume"
    else:
        steps = getattr(training_args, "save_steps", None)
        how = f"one is saved every {steps} steps (--save_steps); a rerun starts afresh"
    return f"{prefix}; no checkpoint was saved in {output_dir}: {how}"


# ---------------------------------------------------------------- tied weights on resume

_MISSING = re.compile(r"There were missing keys in the checkpoint model loaded: (\[.*?\])")
TRAINER_LOGGER = "transformers.trainer"


def tied_partners(model) -> dict[str, list[str]]:
    """Each parameter name of `model` that shares its tensor with others -> the names it shares it with."""
    groups: dict[int, list[str]] = {}
    for name, parameter in model.named_parameters(remove_duplicate=False):
        groups.setdefault(id(parameter), []).append(name)
    return {name: [other for other in names if other != name] for names in groups.values() for name in names}


class TiedWeightsNote(logging.Filter):
    """Turns transformers' "missing keys in the checkpoint" warning into an INFO note when every missing key
    of `model` is tied to a parameter the checkpoint did hold (saving writes a shared tensor once); any other
    missing key keeps the warning as it was. The model is held weakly: the note never keeps a model alive."""

    def __init__(self, model) -> None:
        super().__init__()
        self._model = weakref.ref(model)

    def filter(self, record: logging.LogRecord) -> bool:
        match = _MISSING.search(record.getMessage())
        if match is None:
            return True
        try:
            missing = [str(key) for key in ast.literal_eval(match.group(1))]
        except (ValueError, SyntaxError):
            return True
        model = self._model()
        if model is None or not missing:
            return True
        partners = tied_partners(model)
        loaded_partner = {}
        for key in missing:
            present = [other for other in partners.get(key, ()) if other not in missing]
            if not present:
                return True  # really missing: keep transformers' warning
            loaded_partner[key] = present[0]
        notes = "; ".join(f"{key} is tied to {partner}" for key, partner in loaded_partner.items())
        record.msg = f"{notes}: not missing (a checkpoint stores a tied tensor once)"
        record.args = ()
        record.levelno, record.levelname = logging.INFO, logging.getLevelName(logging.INFO)
        return True


def note_tied_weights_on_resume(model) -> None:
    """While `model` resumes from a checkpoint, its tied weights are not reported missing (`TiedWeightsNote`);
    called by recipes.common.checkpoints.resume.resume_point with the trainer's model, replacing an earlier note."""
    trainer_logger = logging.getLogger(TRAINER_LOGGER)
    for existing in [item for item in trainer_logger.filters if isinstance(item, TiedWeightsNote)]:
        trainer_logger.removeFilter(existing)
    trainer_logger.addFilter(TiedWeightsNote(model))
