"""Where a training run starts: the one rule every recipe (SFT, GRPO, rejection sampling, distillation) follows.

`resume_from_checkpoint true` (or `last`) continues from the newest checkpoint in output_dir, and starts
afresh, saying so, when there is none yet: the same command then serves the first launch and every
relaunch of a preemptible job. A checkpoint cut short while being written is skipped, and so is one whose
weight or state files are damaged (a file cut short by a full disk or an interrupted copy:
recipes.common.checkpoints.folders.damage), the warning naming the file; the one before it is taken. A path is
taken as given, once recipes.common.command_line.checks has checked that it exists and is not damaged.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from recipes.common import trl_private
from recipes.common.checkpoints.folders import (
    TRAINER_STATE,
    complete_checkpoint_at_or_before,
    is_complete,
    last_complete_checkpoint,
)
from recipes.common.checkpoints.interrupt import note_tied_weights_on_resume

logger = logging.getLogger(__name__)


def resume_point(training_args, output_dir: str, model=None) -> str | None:
    """The checkpoint to resume from (for `Trainer.train(resume_from_checkpoint=...)`), or None to start afresh.

    With the trainer's `model`, a resume does not report its tied weights as missing (a checkpoint stores a
    shared tensor once, and transformers' warning read like lost weights)."""
    resume = training_args.resume_from_checkpoint
    last = last_complete_checkpoint(output_dir)
    if isinstance(resume, str) and resume.lower() in ("true", "last"):
        if last is None:
            logger.info("resume_from_checkpoint=%s: %s holds no checkpoint yet, starting afresh", resume, output_dir)
            return None
        resume = last
        logger.info("resuming from %s", last)
    elif resume is None and last is not None:
        logger.warning(
            "%s holds checkpoints; this run starts afresh. Pass --resume_from_checkpoint true to continue instead.",
            output_dir,
        )
    if resume and model is not None:
        note_tied_weights_on_resume(model)
    return resume


def finished_run(training_args, output_dir: str | Path | None = None, resume: str | None = None) -> str | None:
    """One line saying that the run to be resumed has already finished, or None (then train as asked).

    A resume (`resume_from_checkpoint` true, last or a path) whose checkpoint's saved state reached this run's
    end: `max_steps`, or, where max_steps is -1, the epochs the state was saved for (num_train_epochs not
    raised). Why: at b6ef81d rerunning a finished run with `--resume_from_checkpoint true` trained one more step,
    then another at each rerun, and overwrote the final model; a preemptible job's relaunch line would do that
    every time it ran after the end. Raising `max_steps` (or num_train_epochs) continues the run instead.
    `output_dir` and `resume` stand in for training_args' own where a stage trains in a folder of its own."""
    resume = training_args.resume_from_checkpoint if resume is None else resume
    if not isinstance(resume, str) or resume.lower() in ("", "false"):
        return None
    output_dir = training_args.output_dir if output_dir is None else output_dir
    newest = resume.lower() in ("true", "last")
    checkpoint = last_complete_checkpoint(output_dir, warn=False) if newest else resume
    if checkpoint is not None and is_complete(checkpoint):
        state = json.loads((Path(checkpoint) / TRAINER_STATE).read_text())
        where = f"{Path(checkpoint).name} is at step"
    elif newest and (state := _state_in_run_card(output_dir)):  # a run that saved no checkpoint (save_strategy no)
        checkpoint, where = output_dir, "its run card says it ended at step"
    else:
        return None
    step, max_steps = int(state.get("global_step", 0)), training_args.max_steps
    if max_steps > 0:
        if step < max_steps:
            return None
        end, longer = f"max_steps {max_steps}", "raise --max_steps"
    else:
        epochs, saved_for = training_args.num_train_epochs, state.get("num_train_epochs")
        if saved_for is None or step < int(state.get("max_steps", step + 1)) or epochs > saved_for:
            return None
        end, longer = f"num_train_epochs {epochs:g}", "raise --num_train_epochs"
    return (
        f"{output_dir} has finished: {where} {step}, the end of this run ({end}); "
        f"nothing trained, saved or appended. To train on, {longer}; to start afresh, give a new --output_dir"
    )


def _state_in_run_card(output_dir: str | Path) -> dict | None:
    """What a finished run's run_card.json says of its end, in trainer_state.json's terms, or None."""
    try:
        card = json.loads((Path(output_dir) / "run_card.json").read_text())
        training = card.get("config", {}).get("training", {})
        return {"global_step": int(card["final_step"]), "max_steps": int(card["final_step"]),
                "num_train_epochs": training.get("num_train_epochs")}  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def train_resuming(trainer, training_args, output_dir: str | Path):
    """`trainer.train()` by the one resume rule (`resume_point`): every recipe's training runs through here (the
    SFT step, GRPO, the reward model, on-policy distillation; tests/test_architecture.py checks that no other
    `.train(` call exists), so `--resume_from_checkpoint true` means the same in each."""
    return trainer.train(resume_from_checkpoint=resume_point(training_args, str(output_dir), trainer.model))


def restore_before_divergence(trainer, output_dir: str | Path, hacking: dict) -> str | None:
    """After a stop on suspected reward hacking (recipes.common.training.monitor), load into `trainer.model` the
    weights of the last complete checkpoint saved at or before the step the divergence began, so that the model
    saved next is that one; returns its path, or None (then the weights stay as they were at the stop, and a warning
    says so: no checkpoint was that old, or save_total_limit had deleted it)."""
    start = hacking["diverged_from"]
    checkpoint = complete_checkpoint_at_or_before(output_dir, start)
    if checkpoint is None:
        logger.warning(
            "reward hacking: no checkpoint at or before step %d is left in %s; the saved model is the one at the "
            "stop (step %d). Save more often (save_steps) or keep more (save_total_limit).",
            start, output_dir, trainer.state.global_step,
        )  # fmt: skip
        return None
    trl_private.load_checkpoint_weights(trainer, checkpoint)  # the Trainer's own loader: full weights or a LoRA adapter
    logger.warning("reward hacking: the saved model is %s (the divergence began at step %d)", checkpoint, start)
    return checkpoint
