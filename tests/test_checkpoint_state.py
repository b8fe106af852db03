"""The GRPO trainer's own state in a checkpoint (recipes.stages.grpo.checkpoint_state): written by the process that
saves, each process's buffers in a file of its own, read back as they were, and nothing read where nothing was
saved. The resumed run drawing as the uninterrupted one did is tested end to end in test_dynamic_sampling and
test_partial_rollouts."""

from __future__ import annotations

import json

import torch

from recipes.stages.grpo.checkpoint_state import BUFFER_FILE, STATE_FILE, load_rlvr_state, save_rlvr_state
from recipes.stages.grpo.dynamic_sampling import Group
from recipes.stages.grpo.partial_rollouts import Carried


def _one(cls):
    """An instance of `cls` with every field a small value (the dataclasses' fields differ)."""
    import dataclasses

    return cls(**{field.name: torch.tensor([1.0, 2.0]) for field in dataclasses.fields(cls)})


def test_state_and_buffers_come_back_as_saved(tmp_path):
    folder = str(tmp_path / "checkpoint-3")
    state = {"extra_draws": 12, "zero_std_estimate": 0.25, "curriculum": {"rates": [0.5]}}
    group, carried = _one(Group), _one(Carried)
    save_rlvr_state(folder, state, rank=1, buffers={"buffer": [group], "carried": [carried]})
    assert json.loads((tmp_path / "checkpoint-3" / STATE_FILE).read_text()) == state
    assert (tmp_path / "checkpoint-3" / BUFFER_FILE.format(rank=1)).is_file()
    loaded, buffers = load_rlvr_state(folder, rank=1, device="cpu")
    assert loaded == state
    assert [vars(g).keys() for g in buffers["buffer"]] == [vars(group).keys()]
    assert all(torch.equal(vars(buffers["carried"][0])[k], v) for k, v in vars(carried).items())
    assert load_rlvr_state(folder, rank=0, device="cpu") == (state, None)  # rank 0 saved no buffer


def test_a_process_that_does_not_save_writes_only_its_buffers(tmp_path):
    folder = str(tmp_path / "checkpoint-1")
    save_rlvr_state(folder, None, rank=0, buffers={"buffer": [], "carried": []})
    assert not (tmp_path / "checkpoint-1").exists()  # nothing to write
    save_rlvr_state(folder, None, rank=0, buffers={"buffer": [_one(Group)], "carried": []})
    assert not (tmp_path / "checkpoint-1" / STATE_FILE).exists()
    assert load_rlvr_state(folder, rank=0, device="cpu")[0] is None
    assert len(load_rlvr_state(folder, rank=0, device="cpu")[1]["buffer"]) == 1
    assert load_rlvr_state(None, rank=0, device="cpu") == (None, None)
