"""Offline distillation with tools (recipes/distill.py `tools: [python]`): the teacher samples through TRL's tool loop,
its verified traces are kept as whole conversations (the call and the tool's result included), and the student's
SFT renders them with the tool template and trains on the assistant's turns alone, the tool's result at label -100,
as a rejection-sampling round does. The on-policy stage and a loss that is not masked by the template are refused in
one line when the options are read.

The tiny teacher never calls a tool by itself, so its turns are scripted as in tests/test_eval_tools.py (rows 0 and 2
of each batch call python and answer 42 after the result, the others answer 7): the parse, the sandbox, the kept rows
and the student's SFT are the code's own. The mask is checked on the rows SFTTrainer itself tokenized."""

from __future__ import annotations

import json

import pytest

from basics.atomic_files import read_jsonl, write_jsonl
from recipes import distill
from tests.test_eval_tools import script

STUDENT = '{"hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 2, "num_hidden_layers": 1}'
ROWS = [
    {"id": "six-sevens", "prompt": [{"role": "user", "content": "What is 6*7?"}], "answer": "42", "verifier": "math"}
]


def parse(*argv: str):
    return distill.make_parser().parse_args(list(argv))


def _argv(teacher, tmp_path, *extra: str) -> tuple[str, ...]:
    return (
        "--teacher_model_name_or_path", str(teacher), "--demo_model_if_missing", "false", "--student_spec", STUDENT,
        "--mode", "offline", "--output_dir", str(tmp_path / "distill"), "--dataset_name", str(tmp_path / "rows.jsonl"),
        "--eval_samples_per_problem", "0", "--sampling", "{n: 4, max_new_tokens: 250, batch_size: 8}",
        "--max_per_problem", "4", "--tools", "python", "--tool_options", "{timeout_s: 2}",
        "--max_tool_calling_iterations", "2", "--max_steps", "2", "--per_device_train_batch_size", "2",
        "--warmup_steps", "0", "--max_length", "1024", *extra,
    )  # fmt: skip


def test_the_student_trains_on_the_teachers_tool_traces_with_the_tool_result_masked(
    tiny_model_dir, tmp_path, monkeypatch
):
    import trl

    import eval.tools.trl_sampling as trl_sampling

    write_jsonl(tmp_path / "rows.jsonl", ROWS)
    make = trl_sampling.make_tool_sampler

    def scripted_teacher(*args, **kwargs):  # the teacher's sampler, its turns scripted
        sampler = make(*args, **kwargs)
        script(sampler, {0: "print(6*7)", 2: "print(7*6)"})
        return sampler

    monkeypatch.setattr(trl_sampling, "make_tool_sampler", scripted_teacher)
    built = []

    class RecordedSFTTrainer(trl.SFTTrainer):  # the student's SFT trainer, as train_sft builds it
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            built.append(self)

    monkeypatch.setattr(trl, "SFTTrainer", RecordedSFTTrainer)
    final = distill.main(*parse(*_argv(tiny_model_dir, tmp_path)))

    out = tmp_path / "distill"
    traces = read_jsonl(out / "traces.jsonl")
    assert len(traces) == 2  # the two callers answer 42 after the tool, the others 7 (wrong): two kept
    for row in traces:
        assert [message["role"] for message in row["messages"]] == ["user", "assistant", "tool", "assistant"]
        assert row["messages"][2]["content"].strip() == "42" and row["messages"][3]["content"] == "so \\boxed{42}"
        assert [schema["function"]["name"] for schema in json.loads(row["tools"])] == ["python"]
    assert {row["messages"][1]["tool_calls"][0]["function"]["arguments"]["code"] for row in traces} == {
        "print(6*7)",
        "print(7*6)",
    }

    (trainer,) = built
    assert trainer.args.assistant_only_loss is True
    tokenizer = trainer.processing_class
    assert "<tool_response>" in tokenizer.chat_template  # the tool template, saved with the student below
    assert "<tool_response>" in (final / "chat_template.jinja").read_text()
    assert len(trainer.train_dataset) == 2
    for row in trainer.train_dataset:  # what the student's loss reads: SFTTrainer's own tokens and labels
        ids, mask = row["input_ids"], [label != -100 for label in row["labels"]]
        assert [label for label in row["labels"] if label != -100] == [t for t, on in zip(ids, mask, strict=True) if on]
        trained = tokenizer.decode([token for token, on in zip(ids, mask, strict=True) if on])
        untrained = tokenizer.decode([token for token, on in zip(ids, mask, strict=True) if not on])
        assert "print(" in trained and "so \\boxed{42}" in trained and "<tool_response>" not in trained
        assert "<tool_response>42" in untrained and "What is 6*7?" in untrained
    stats = json.loads((out / "distill_stats.json").read_text())
    assert stats["offline"]["traces_kept"] == 2 and stats["final_student"] == str(final)


def test_tools_refuse_the_on_policy_stage_and_an_unmasked_loss_in_one_line(tiny_model_dir, tmp_path):
    with pytest.raises(ValueError, match="offline only"):
        parse(*_argv(tiny_model_dir, tmp_path, "--mode", "both"))
    with pytest.raises(ValueError, match="assistant_only_loss: true"):
        parse(*_argv(tiny_model_dir, tmp_path, "--assistant_only_loss", "false"))
    script_args, training_args, _ = parse(*_argv(tiny_model_dir, tmp_path))
    assert script_args.tools == ["python"] and training_args.assistant_only_loss is True
