"""RLVRGRPOTrainer's own state in each checkpoint (`RLVRStateMixin`): the extra-prompt stream's position,
adaptive dynamic sampling's zero-variance estimate and buffer (recipes.stages.grpo.dynamic_sampling), the groups
partial rollouts carry (recipes.stages.grpo.partial_rollouts), the curriculum's pass rates; restored with `resume_from_checkpoint`, so a resumed run draws and buffers as the
uninterrupted one would have."""

from __future__ import annotations

import json
import logging
import os

import torch
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from basics.atomic_files import write_atomic
from recipes.common import trl_private
from recipes.stages.grpo.dynamic_sampling import Group
from recipes.stages.grpo.partial_rollouts import Carried

logger = logging.getLogger(__name__)

STATE_FILE = "rlvr_state.json"  # the trainer's own state in each checkpoint
BUFFER_FILE = "rlvr_buffer_rank{rank}.pt"  # adaptive sampling's buffer, partial rollouts' groups: per process


class RLVRStateMixin:
    """RLVRGRPOTrainer's own state in each checkpoint, restored with `resume_from_checkpoint`: the extra-prompt
    stream's position, adaptive sampling's estimate and buffer (one file per process), the curriculum."""

    def _save_checkpoint(self, model, trial):
        super()._save_checkpoint(model, trial)
        folder = os.path.join(trl_private.output_dir(self, trial), f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}")
        if self.args.should_save:
            state = {"extra_draws": self._extra_draws, "zero_std_estimate": self._zero_std_estimate}
            if self.curriculum is not None:
                state["curriculum"] = self.curriculum.state_dict()
            write_atomic(os.path.join(folder, STATE_FILE), json.dumps(state))
        if self._buffer or self._carried:  # every process saves its own buffer and carried groups
            os.makedirs(folder, exist_ok=True)
            rank = self.accelerator.process_index
            saved = {
                "buffer": [vars(group) for group in self._buffer],
                "carried": [vars(group) for group in self._carried],
            }
            torch.save(saved, os.path.join(folder, BUFFER_FILE.format(rank=rank)))

    def _load_optimizer_and_scheduler(self, checkpoint):
        super()._load_optimizer_and_scheduler(checkpoint)
        self._restore_rlvr_state(checkpoint)

    def _restore_rlvr_state(self, checkpoint) -> None:
        """This trainer's own state from `checkpoint` (a folder), where it was saved."""
        path = os.path.join(checkpoint, STATE_FILE) if checkpoint else None
        if path and os.path.exists(path):
            with open(path) as handle:
                state = json.load(handle)
            self._extra_draws = state.get("extra_draws", 0)
            self._zero_std_estimate = state.get("zero_std_estimate")
            if self.curriculum is not None and "curriculum" in state:
                self.curriculum.load_state_dict(state["curriculum"])
            logger.info("restored dynamic-sampling and curriculum state from %s", path)
        buffer = (
            os.path.join(checkpoint, BUFFER_FILE.format(rank=self.accelerator.process_index)) if checkpoint else None
        )
        if buffer and os.path.exists(buffer):
            saved = torch.load(buffer, map_location=self.accelerator.device, weights_only=False)
            if isinstance(saved, list):  # a checkpoint from before partial rollouts: the buffer alone
                saved = {"buffer": saved}
            self._buffer = [Group(**fields) for fields in saved.get("buffer", [])]
            self._carried = [Carried(**fields) for fields in saved.get("carried", [])]
