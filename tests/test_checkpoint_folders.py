"""recipes/common/checkpoints/folders.py, the one reader of `checkpoint-N` names: the step of a name, the complete
folders newest first, the newest complete one and the one an interruption cut short; and no other module of the
recipes parses a checkpoint folder's name itself (it was parsed three ways before, issue 56)."""

from __future__ import annotations

import re

from recipes.common.checkpoints.folders import (
    TRAINER_STATE,
    checkpoint_folders,
    checkpoint_step,
    complete_checkpoints,
    newest_checkpoint,
)
from tests.conftest import REPO


def make(root, name: str, complete: bool = True):
    folder = root / name
    folder.mkdir(parents=True)
    if complete:
        (folder / TRAINER_STATE).write_text("{}")
    return folder


def test_the_step_of_a_name():
    assert checkpoint_step("out/checkpoint-120") == 120
    assert checkpoint_step("checkpoint-7") == 7
    for name in ("checkpoint-", "checkpoint-x", "checkpoint-12-old", "ckpt-3", "my-checkpoint-4"):
        assert checkpoint_step(name) is None, name


def test_folders_in_step_order_and_the_complete_ones_newest_first(tmp_path):
    nine, ten, hundred = (
        make(tmp_path, "checkpoint-9"),
        make(tmp_path, "checkpoint-10"),
        make(tmp_path, "checkpoint-100"),
    )
    cut = make(tmp_path, "checkpoint-110", complete=False)
    make(tmp_path, "checkpoint-12-old")
    (tmp_path / "checkpoint-5").write_text("a file, not a folder")
    assert checkpoint_folders(tmp_path) == [nine, ten, hundred, cut]  # by number, not by text (10 after 9)
    assert complete_checkpoints(tmp_path) == [hundred, ten, nine]
    assert complete_checkpoints(tmp_path, up_to=ten) == [ten, nine]
    assert newest_checkpoint(tmp_path) == (hundred, cut)
    assert newest_checkpoint(tmp_path / "absent") == (None, None)


def test_a_checkpoint_whose_state_file_is_cut_short_is_not_complete(tmp_path):
    """A Ctrl-C while the Trainer wrote trainer_state.json (last) left it empty: the checkpoint is the one cut short,
    and the one before it is the last to resume from, as for a missing state file."""
    eight = make(tmp_path, "checkpoint-8")
    for partial in ("", '{"global_step": 1'):
        cut = tmp_path / "checkpoint-9"
        cut.mkdir(exist_ok=True)
        (cut / TRAINER_STATE).write_text(partial)
        assert complete_checkpoints(tmp_path) == [eight] and newest_checkpoint(tmp_path) == (eight, cut)


def test_a_stages_checkpoints_below_the_run_are_found_by_time(tmp_path):
    import os

    first = make(tmp_path, "round_0/checkpoint-50")
    second = make(tmp_path, "round_1/checkpoint-20")
    os.utime(first, (1, 1))  # written before the second, whatever their numbers
    assert newest_checkpoint(tmp_path) == (second, None)
    assert newest_checkpoint(tmp_path, depth=1) == (None, None)


def test_no_other_module_parses_a_checkpoint_name():
    by_hand = re.compile(r"checkpoint-.*(split|rpartition|partition)\(\"-\"\)|(split|rpartition)\(\"-\"\).*checkpoint")
    offenders = [
        f"{path.relative_to(REPO)}:{number}"
        for package in ("recipes", "eval", "scripts")
        for path in sorted((REPO / package).rglob("*.py"))
        if path != REPO / "recipes" / "common" / "checkpoints" / "folders.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if by_hand.search(line) or re.search(r"re\.compile\(r?\"checkpoint-", line)
    ]
    assert not offenders, f"checkpoint-N names parsed outside recipes/common/checkpoints/folders.py: {offenders}"
