"""Where a training run starts: the one rule every recipe (SFT, GRPO, rejection sampling, distillation) follows.

`resume_from_checkpoint true` (or `last`) continues from the newest checkpoint in output_dir, and starts
afresh, saying so, when there is none yet: the same command then serves the first launch and every
relaunch of a preemptible job. A path is taken as given (recipes.common.checks has checked it exists).
"""

from __future__ import annotations

import logging
from pathlib import Path

logger = logging.getLogger(__name__)


def resume_point(training_args, output_dir: str) -> str | None:
    """The checkpoint to resume from (for `Trainer.train(resume_from_checkpoint=...)`), or None to start afresh."""
    from transformers.trainer_utils import get_last_checkpoint

    resume = training_args.resume_from_checkpoint
    has_checkpoint = Path(output_dir).is_dir() and get_last_checkpoint(output_dir) is not None
    if isinstance(resume, str) and resume.lower() in ("true", "last"):
        if not has_checkpoint:
            logger.info("resume_from_checkpoint=%s: %s holds no checkpoint yet, starting afresh", resume, output_dir)
            return None
        resume = get_last_checkpoint(output_dir)
        logger.info("resuming from %s", resume)
        return resume
    if resume is None and has_checkpoint:
        logger.warning(
            "%s holds checkpoints; this run starts afresh. Pass --resume_from_checkpoint true to continue instead.",
            output_dir,
        )
    return resume
