"""RLVRGRPOTrainer's own state in each checkpoint (`save_rlvr_state`, `load_rlvr_state`): the extra-prompt stream's position,
adaptive dynamic sampling's zero-variance estimate and buffer (recipes.stages.grpo.dynamic_sampling), the groups
partial rollouts carry (recipes.stages.grpo.partial_rollouts), the curriculum's pass rates; restored with `resume_from_checkpoint`, so a resumed run draws and buffers as the
uninterrupted one would have."""

from __future__ import annotations

import json
import logging
import os

import torch

from basics.atomic_files import write_atomic
from recipes.stages.grpo.dynamic_sampling import Group
from recipes.stages.grpo.partial_rollouts import Carried

logger = logging.getLogger(__name__)

STATE_FILE = "rlvr_state.json"  # the trainer's own state in each checkpoint
BUFFER_FILE = "rlvr_buffer_rank{rank}.pt"  # adaptive sampling's buffer, partial rollouts' groups: per process


def save_rlvr_state(folder: str, state: dict | None, rank: int, buffers: dict[str, list]) -> None:
    """Into checkpoint `folder`: `state` (JSON: the extra-prompt stream's position, adaptive sampling's estimate,
    the curriculum's state; given by the process that saves, None elsewhere) as STATE_FILE, and this process's
    `buffers` (adaptive sampling's `buffer` of Groups, partial rollouts' `carried`), where any holds something, as
    its own BUFFER_FILE."""
    if state is not None:
        write_atomic(os.path.join(folder, STATE_FILE), json.dumps(state))
    if any(buffers.values()):  # every process saves its own buffer and carried groups
        os.makedirs(folder, exist_ok=True)
        saved = {name: [vars(group) for group in groups] for name, groups in buffers.items()}
        torch.save(saved, os.path.join(folder, BUFFER_FILE.format(rank=rank)))


def load_rlvr_state(checkpoint: str | None, rank: int, device) -> tuple[dict | None, dict[str, list] | None]:
    """(the state save_rlvr_state wrote into `checkpoint`, or None; this process's buffers as Groups and Carried,
    or None where it saved none)."""
    state = buffers = None
    path = os.path.join(checkpoint, STATE_FILE) if checkpoint else None
    if path and os.path.exists(path):
        with open(path) as handle:
            state = json.load(handle)
        logger.info("restored dynamic-sampling and curriculum state from %s", path)
    buffer = os.path.join(checkpoint, BUFFER_FILE.format(rank=rank)) if checkpoint else None
    if buffer and os.path.exists(buffer):
        saved = torch.load(buffer, map_location=device, weights_only=False)
        if isinstance(saved, list):  # a checkpoint from before partial rollouts: the buffer alone
            saved = {"buffer": saved}
        buffers = {
            "buffer": [Group(**fields) for fields in saved.get("buffer", [])],
            "carried": [Carried(**fields) for fields in saved.get("carried", [])],
        }
    return state, buffers
