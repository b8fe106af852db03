"""Issue 40, item 7: a damaged checkpoint (its model.safetensors cut short) is named in one line. At db84883
an explicit path ended in a safetensors traceback (exit 1), and `--resume_from_checkpoint true` took the
damaged checkpoint all the same; now the path is refused with the file and the checkpoint before it that
loads, and `true` skips to that one, saying so."""

from __future__ import annotations

import json
import logging
import zipfile

import pytest
import torch
from safetensors.torch import save_file

from recipes import grpo
from recipes.common.checkpoints.folders import damage, last_complete_checkpoint
from recipes.common.checkpoints.resume import resume_point
from tests.test_user_errors import cli_error


def _checkpoint(root, step: int) -> object:
    folder = root / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    save_file({"weight": torch.arange(64, dtype=torch.float32).reshape(8, 8), "bias": torch.ones(8)},
              str(folder / "model.safetensors"))  # fmt: skip
    torch.save({"state": {0: torch.zeros(8)}}, folder / "optimizer.pt")
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    return folder


def _cut(path, keep: int) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:keep] if keep >= 0 else data[:keep])


def test_whole_checkpoints_have_no_damage_and_each_cut_is_named(tmp_path):
    folder = _checkpoint(tmp_path, 2)
    assert damage(folder) is None
    size = (folder / "model.safetensors").stat().st_size
    _cut(folder / "model.safetensors", -100)
    assert damage(folder) == f"model.safetensors is cut short: {size - 100} of its {size} bytes"
    _cut(folder / "model.safetensors", 5)
    assert damage(folder) == "model.safetensors is cut short: 5 bytes, not even its header"
    other = _checkpoint(tmp_path, 4)
    _cut(other / "optimizer.pt", -30)
    assert damage(other).startswith("optimizer.pt cannot be read")
    state = _checkpoint(tmp_path, 6)
    _cut(state / "trainer_state.json", 7)  # a Ctrl-C while the Trainer wrote it (last)
    assert damage(state) == "trainer_state.json is cut short (7 bytes that are not JSON)"


def test_an_explicit_checkpoint_whose_state_is_cut_short_is_one_line_naming_the_one_that_loads(
    tmp_path, capsys, monkeypatch
):
    _checkpoint(tmp_path, 2)
    cut = _checkpoint(tmp_path, 4)
    (cut / "trainer_state.json").write_text("")
    argv = ["--output_dir", str(tmp_path), "--resume_from_checkpoint", str(cut), "--max_steps", "8"]
    line = cli_error(capsys, monkeypatch, grpo, argv)
    assert "trainer_state.json" in line and f"resume from {tmp_path / 'checkpoint-2'}" in line, line


def test_resume_true_skips_a_damaged_checkpoint_and_says_so(tmp_path, caplog):
    _checkpoint(tmp_path, 2)
    _checkpoint(tmp_path, 4)
    _cut(tmp_path / "checkpoint-4" / "model.safetensors", -10)
    with caplog.at_level(logging.WARNING):
        assert last_complete_checkpoint(tmp_path) == str(tmp_path / "checkpoint-2")
        args = type("Args", (), {"resume_from_checkpoint": "true"})()
        assert resume_point(args, str(tmp_path)) == str(tmp_path / "checkpoint-2")
    assert any("checkpoint-4 is damaged (model.safetensors is cut short" in r.getMessage() for r in caplog.records)


def test_an_explicit_damaged_checkpoint_is_one_line_naming_the_file_and_the_one_that_loads(
    tmp_path, capsys, monkeypatch
):
    _checkpoint(tmp_path, 2)
    damaged = _checkpoint(tmp_path, 4)
    _cut(damaged / "model.safetensors", -10)
    argv = ["--output_dir", str(tmp_path), "--resume_from_checkpoint", str(damaged)]
    line = cli_error(capsys, monkeypatch, grpo, argv)
    assert "checkpoint-4' is damaged: model.safetensors is cut short" in line
    assert f"resume from {tmp_path / 'checkpoint-2'}" in line


@pytest.mark.parametrize("name", ["rng_state.pth", "pytorch_model.bin"])
def test_other_torch_files_are_checked_and_older_formats_left_alone(tmp_path, name):
    folder = _checkpoint(tmp_path, 2)
    torch.save({"x": torch.ones(4)}, folder / name)
    assert damage(folder) is None and zipfile.is_zipfile(folder / name)
    _cut(folder / name, -20)
    assert damage(folder).startswith(f"{name} cannot be read")
    (folder / name).write_bytes(b"\x80\x02legacy pickle")  # not a zip: not ours to judge
    assert damage(folder) is None
