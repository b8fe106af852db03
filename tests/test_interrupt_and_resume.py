"""Stopping a run and resuming it (issue 28, item 7): Ctrl-C ends in one line that names the last checkpoint
and the flag that continues from it (exit code 130, no traceback), and the resumed run of a model whose
output layer is tied to its embeddings does not warn that the tied weight is missing."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from recipes import sft
from recipes.common.checkpoints.interrupt import TRAINER_LOGGER, interrupted_message, note_tied_weights_on_resume
from recipes.common.command_line import config
from tests.conftest import REPO


class Records(logging.Handler):
    """The trainer logger's records, read where they are emitted (transformers' loggers do not propagate)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[tuple[int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append((record.levelno, record.getMessage()))


@pytest.fixture
def trainer_records():
    handler = Records()
    trainer_logger = logging.getLogger(TRAINER_LOGGER)
    trainer_logger.addHandler(handler)
    yield handler
    trainer_logger.removeHandler(handler)


def sft_argv(model_dir: Path, output_dir: Path, max_steps: int) -> list[str]:
    return [
        "--model_name_or_path", str(model_dir), "--dataset_name", "synthetic:1", "--dataset_num_rows", "64",
        "--per_device_train_batch_size", "4", "--max_steps", str(max_steps), "--save_steps", "2",
        "--logging_steps", "1", "--output_dir", str(output_dir), "--report_to", "none",
    ]  # fmt: skip


def test_ctrl_c_names_the_checkpoint_and_the_resumed_run_keeps_tied_weights_quiet(
    tiny_model_dir, tmp_path, monkeypatch, trainer_records
):
    output_dir = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, str(REPO / "recipes" / "sft.py"), *sft_argv(tiny_model_dir, output_dir, 100_000)]
    log = tmp_path / "stderr.txt"
    with log.open("w") as stderr:  # a file, not a pipe: a pipe nobody reads fills up and stops the run
        # SIGINT back to its default in the child: a suite started as a background job of a non-interactive
        # shell (`cmd &`) inherits it ignored, and Python then installs no KeyboardInterrupt handler at all.
        process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=stderr, text=True, env=env,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 240
            # any complete checkpoint: with the config's save_total_limit 1, checkpoint-2 may already be gone
            while not list(output_dir.glob("checkpoint-*/trainer_state.json")):
                assert process.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, "no checkpoint within 240 s"
                time.sleep(0.2)
            process.send_signal(signal.SIGINT)  # what Ctrl-C sends
            process.wait(timeout=120)
        finally:
            if process.poll() is None:
                process.kill()
    err = log.read_text()
    assert process.returncode == 130, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    last = [line for line in err.splitlines() if line.strip()][-2:]
    message = next((line for line in last if line.startswith("interrupted")), "")
    assert "the last checkpoint is" in message, last
    checkpoint = Path(re.search(r"the last checkpoint is (\S+checkpoint-\d+):", message).group(1))
    assert checkpoint.parent == output_dir and (checkpoint / "trainer_state.json").is_file(), message
    # `true` when the newest checkpoint is complete; its path when Ctrl-C cut the next one short
    assert re.search(rf"--resume_from_checkpoint (true \(or that path\)|{re.escape(str(checkpoint))}) to", message)

    # Resume it here: the tiny model's lm_head shares the embeddings' tensor, which a checkpoint stores once.
    step = int(checkpoint.name.split("-")[1])
    monkeypatch.setattr(config, "setup_logging", lambda: None)
    sft.cli([*sft_argv(tiny_model_dir, output_dir, step + 1), "--resume_from_checkpoint", str(checkpoint)])
    messages = [text for _, text in trainer_records.messages]
    assert not [m for m in messages if "missing keys" in m], messages
    assert any("lm_head.weight is tied to model.embed_tokens.weight" in m for m in messages), messages
    # metrics.jsonl holds the one run: each step once, in order, though steps after the checkpoint were logged
    # before the interrupt too (issue 40)
    records = [json.loads(line) for line in (output_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [record["step"] for record in records if "loss" in record]  # the step's own line, not the run's summary
    assert steps == list(range(1, step + 2)), steps


def test_only_tied_keys_are_explained(tiny_model, tmp_path, trainer_records):
    """A key that really is missing keeps transformers' warning; a tied one becomes a note."""
    from transformers import Trainer, TrainingArguments

    trainer = Trainer(model=tiny_model, args=TrainingArguments(output_dir=str(tmp_path), report_to=[], use_cpu=True))
    note_tied_weights_on_resume(trainer.model)
    trainer._issue_warnings_after_load(SimpleNamespace(missing_keys=["lm_head.weight"], unexpected_keys=[]))
    trainer._issue_warnings_after_load(
        SimpleNamespace(missing_keys=["lm_head.weight", "model.norm.weight"], unexpected_keys=[])
    )
    (tied_level, tied), (lost_level, lost) = trainer_records.messages
    assert tied_level == logging.INFO and "lm_head.weight is tied to model.embed_tokens.weight" in tied
    assert lost_level == logging.WARNING and "missing keys" in lost and "model.norm.weight" in lost


def test_the_interrupt_message_for_no_checkpoint_a_stage_s_checkpoint_and_one_cut_short(tmp_path):
    steps = SimpleNamespace(output_dir=str(tmp_path / "run"), save_strategy="steps", save_steps=25)
    assert "no checkpoint was saved" in interrupted_message(steps)
    assert "one is saved every 25 steps (--save_steps)" in interrupted_message(steps)
    off = SimpleNamespace(output_dir=str(tmp_path / "run"), save_strategy="no", save_steps=25)
    assert "--save_strategy steps --save_steps N" in interrupted_message(off)

    nested = tmp_path / "run" / "round_1" / "model" / "checkpoint-4"  # rejection sampling's round
    nested.mkdir(parents=True)
    (nested / "trainer_state.json").write_text("{}")
    message = interrupted_message(steps)
    assert f"the last checkpoint is {nested}:" in message and "--resume_from_checkpoint true to continue" in message

    for step in (2, 4):  # checkpoint-4 was being written when Ctrl-C came: it has no trainer_state.json
        (tmp_path / "run" / f"checkpoint-{step}").mkdir()
    (tmp_path / "run" / "checkpoint-2" / "trainer_state.json").write_text("{}")
    message = interrupted_message(steps)
    done, cut_short = tmp_path / "run" / "checkpoint-2", tmp_path / "run" / "checkpoint-4"
    assert f"while {cut_short} was being written (it is incomplete: delete it)" in message
    assert f"the last checkpoint is {done}: rerun the same command with --resume_from_checkpoint {done} " in message
