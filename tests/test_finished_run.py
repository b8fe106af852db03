"""Issue 57, items 2 and 3: a finished run is left alone, and an explicit checkpoint path that holds none is one line.

At b6ef81d rerunning `--max_steps N --resume_from_checkpoint true` after the run had finished trained one more
step each time (checkpoint-N+1, N+2, ...) and overwrote the final model, and metrics.jsonl read ..., N, N,
N+1: the end-of-run summary was a second line at step N. A path given to resume from that held no checkpoint
ended in transformers' "Can't find a valid checkpoint" traceback once the model had loaded.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

from recipes import sft
from recipes.common.checkpoints.resume import finished_run
from recipes.common.command_line import config
from recipes.common.command_line.checks import ConfigError
from recipes.common.training.monitor import RLVRMonitor
from tests.test_interrupt_and_resume import sft_argv


def _steps(run: Path) -> list[int]:
    return [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]


def _state(run: Path) -> dict[str, bytes]:
    """Every file of the run, by path, with its bytes: what a rerun must leave as it was."""
    return {str(path.relative_to(run)): path.read_bytes() for path in sorted(run.rglob("*")) if path.is_file()}


def test_a_finished_run_is_left_alone_and_a_raised_max_steps_continues_it(
    tiny_model_dir, tmp_path, monkeypatch, caplog
):
    monkeypatch.setattr(config, "setup_logging", lambda: None)
    run = tmp_path / "run"
    sft.cli(sft_argv(tiny_model_dir, run, 2))
    assert _steps(run) == [1, 2]  # the end-of-run summary merged into step 2's line, not a line of its own
    assert "train_runtime" in json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    before = _state(run)

    with caplog.at_level(logging.INFO):
        returned = sft.cli([*sft_argv(tiny_model_dir, run, 2), "--resume_from_checkpoint", "true"])
    assert returned == run
    said = [record.getMessage() for record in caplog.records if "has finished" in record.getMessage()]
    assert len(said) == 1 and "checkpoint-2 is at step 2" in said[0] and "max_steps 2" in said[0], said
    assert "--max_steps" in said[0]  # how to train on
    assert _state(run) == before  # nothing trained, saved or appended

    sft.cli([*sft_argv(tiny_model_dir, run, 4), "--resume_from_checkpoint", "true"])  # max_steps raised: it goes on
    assert (run / "checkpoint-4" / "trainer_state.json").is_file()
    assert _steps(run) == [1, 2, 3, 4]  # each step once


def test_the_end_of_a_run_by_epochs_is_read_from_its_saved_state(tmp_path):
    checkpoint = tmp_path / "checkpoint-8"
    checkpoint.mkdir()
    (checkpoint / "trainer_state.json").write_text(
        json.dumps({"global_step": 8, "max_steps": 8, "num_train_epochs": 2})
    )

    def args(max_steps: int, epochs: float, resume: str | None = "true") -> SimpleNamespace:
        return SimpleNamespace(
            resume_from_checkpoint=resume, output_dir=str(tmp_path), max_steps=max_steps, num_train_epochs=epochs
        )

    assert "num_train_epochs 2" in finished_run(args(-1, 2))
    assert finished_run(args(-1, 3)) is None  # more epochs: train on
    assert "max_steps 8" in finished_run(args(8, 2)) and "max_steps 5" in finished_run(args(5, 2))
    assert finished_run(args(9, 2)) is None
    assert finished_run(args(8, 2, resume=None)) is None  # no resume asked for: the usual rules
    assert "checkpoint-8" in finished_run(args(8, 2, resume=str(checkpoint)))


def test_a_path_that_holds_no_checkpoint_is_one_line_naming_those_that_exist(tiny_model_dir, tmp_path):
    run = tmp_path / "run"
    for step in (2, 4):
        (run / f"checkpoint-{step}").mkdir(parents=True)
        (run / f"checkpoint-{step}" / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    parser = sft.make_parser()
    with pytest.raises(ConfigError) as error:  # the run's folder, not one of its checkpoints
        parser.parse_args([*sft_argv(tiny_model_dir, run, 6), "--resume_from_checkpoint", str(run)])
    message = str(error.value)
    assert "holds no checkpoint" in message and "trainer_state.json" in message, message
    assert str(run / "checkpoint-4") in message and str(run / "checkpoint-2") in message, message
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConfigError, match="holds no checkpoint.*none was found"):
        parser.parse_args([*sft_argv(tiny_model_dir, tmp_path / "other", 6), "--resume_from_checkpoint", str(empty)])


def test_a_second_log_at_a_step_is_merged_into_its_line(tmp_path):
    monitor = RLVRMonitor(tmp_path)

    def log(step: int, **values) -> None:
        monitor.on_log(None, SimpleNamespace(global_step=step, is_world_process_zero=True), None, logs=values)

    log(1, loss=0.5)
    log(2, loss=0.4)
    log(2, eval_pass_at_1=0.25)  # a held-out evaluation at a logged step
    log(2, train_runtime=3.0, loss=0.45)  # the end-of-run summary; a key logged again takes the later value
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert records == [
        {"step": 1, "loss": 0.5},
        {"step": 2, "loss": 0.45, "eval_pass_at_1": 0.25, "train_runtime": 3.0},
    ]


def test_a_run_that_saved_no_checkpoint_is_known_finished_by_its_run_card(tmp_path):
    """save_strategy no (the demo's distillation): the run card, written at the end, says where the run ended."""
    card = {"final_step": 40, "config": {"training": {"max_steps": 40, "num_train_epochs": 3.0}}}
    (tmp_path / "run_card.json").write_text(json.dumps(card))

    def args(max_steps: int, resume: str = "true") -> SimpleNamespace:
        return SimpleNamespace(
            resume_from_checkpoint=resume, output_dir=str(tmp_path), max_steps=max_steps, num_train_epochs=3.0
        )

    assert "its run card says it ended at step 40" in finished_run(args(40))
    assert finished_run(args(60)) is None  # raised: there is no checkpoint to go on from, so it starts afresh
    assert finished_run(args(40, resume="false")) is None
