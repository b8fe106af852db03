"""Where a run starts (recipes/common/checkpoints/resume.py): one rule for every recipe. `resume_from_checkpoint true`
continues from the newest checkpoint and starts afresh when there is none; GRPO raised there before."""

from __future__ import annotations

from types import SimpleNamespace

from recipes import grpo
from recipes.common.checkpoints.resume import resume_point
from recipes.stages.grpo.setup import BuiltTrainer


def make_checkpoints(folder, *steps):
    for step in steps:
        (folder / f"checkpoint-{step}").mkdir(parents=True)
        (folder / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")


def test_true_takes_the_newest_checkpoint_by_step_not_by_name(tmp_path):
    make_checkpoints(tmp_path, 2, 10, 9)
    assert resume_point(SimpleNamespace(resume_from_checkpoint="true"), str(tmp_path)) == str(
        tmp_path / "checkpoint-10"
    )
    assert resume_point(SimpleNamespace(resume_from_checkpoint="LAST"), str(tmp_path)) == str(
        tmp_path / "checkpoint-10"
    )


def test_true_skips_a_checkpoint_cut_short_while_being_written(tmp_path):
    # Ctrl-C (or a preemption) during a save leaves checkpoint-N without trainer_state.json, which the Trainer
    # writes last: transformers' get_last_checkpoint took it, and resuming from it failed.
    make_checkpoints(tmp_path, 5, 10)
    (tmp_path / "checkpoint-15").mkdir()
    (tmp_path / "checkpoint-15" / "model.safetensors").write_text("half")
    assert resume_point(SimpleNamespace(resume_from_checkpoint="true"), str(tmp_path)) == str(
        tmp_path / "checkpoint-10"
    )


def test_true_without_a_checkpoint_starts_afresh(tmp_path):
    assert resume_point(SimpleNamespace(resume_from_checkpoint="true"), str(tmp_path)) is None
    assert resume_point(SimpleNamespace(resume_from_checkpoint="true"), str(tmp_path / "not-yet")) is None


def test_a_path_or_nothing_is_taken_as_given(tmp_path):
    make_checkpoints(tmp_path, 3)
    given = str(tmp_path / "checkpoint-3")
    assert resume_point(SimpleNamespace(resume_from_checkpoint=given), str(tmp_path)) == given
    assert resume_point(SimpleNamespace(resume_from_checkpoint=None), str(tmp_path)) is None


def test_grpo_follows_the_same_rule(tmp_path, monkeypatch):
    """grpo.main with `resume true` and an empty output_dir trains from the start (it raised ValueError before)."""
    trained = []
    trainer = SimpleNamespace(
        train=lambda resume_from_checkpoint: trained.append(resume_from_checkpoint),
        accelerator=SimpleNamespace(is_main_process=False),
        model=None,
    )
    built = BuiltTrainer(trainer, SimpleNamespace(warnings=[], hacking=None), "model", None, [])
    monkeypatch.setattr(grpo, "build_trainer", lambda *args, **kwargs: built)
    monkeypatch.setattr(grpo, "save_trainer_for_inference", lambda *args, **kwargs: None)
    script = SimpleNamespace(merge_lora=False)
    training = SimpleNamespace(seed=0, output_dir=str(tmp_path / "out"), resume_from_checkpoint="true")
    assert grpo.main(script, training, SimpleNamespace()) == tmp_path / "out"
    make_checkpoints(tmp_path / "out", 4)
    grpo.main(script, training, SimpleNamespace())
    assert trained == [None, str(tmp_path / "out" / "checkpoint-4")]
