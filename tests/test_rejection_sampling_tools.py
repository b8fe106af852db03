"""Rejection sampling (and distillation, which shares recipes.common.traces) with tools: a verified trajectory is kept
as its whole conversation, the tool call and the tool's result included, in the form TRL's SFTTrainer reads (a
`messages` list and the tools' JSON schemas in a `tools` column), and SFT's assistant mask leaves the tool's result
out. The policy is scripted as in tests/test_eval_tools.py, so the calls really run in the sandbox."""

from __future__ import annotations

import json

import pytest

from tests.test_eval_tools import script

ROWS = [
    {"id": "six-sevens", "prompt": [{"role": "user", "content": "What is 6*7?"}], "answer": "42", "verifier": "math"}
]


@pytest.fixture(scope="module")
def kept_rows(tiny_model_dir):
    from eval.tools.trl_sampling import make_tool_sampler
    from recipes.common.traces import TraceArguments, collect_traces

    args = TraceArguments(
        sampling={"n": 4, "temperature": 1.0, "max_new_tokens": 250}, max_per_problem=4, tools=["python"],
        tool_options={"timeout_s": 2.0}, max_tool_calling_iterations=2,
    )  # fmt: skip
    sampler = make_tool_sampler(str(tiny_model_dir), args.tools, args.tool_options, 2, batch_size=8)
    script(sampler, {0: "print(6*7)", 2: "print(7*6)"})  # two callers, two distinct trajectories, both right
    try:
        kept, results = collect_traces(sampler, ROWS, args, seed=0, progress=False)
    finally:
        tokenizer = sampler.tokenizer
        sampler.close()
    return kept, results, tokenizer


def test_a_kept_row_carries_its_tool_messages(kept_rows):
    kept, results, _ = kept_rows
    assert results[0].num_correct == 2  # the callers answer 42 after the tool; the others 7
    assert len(kept) == 2
    for row in kept:
        messages = row["messages"]
        assert messages[0] == ROWS[0]["prompt"][0]
        assert [message["role"] for message in messages] == ["user", "assistant", "tool", "assistant"]
        assert messages[1]["tool_calls"][0]["function"]["name"] == "python"
        assert messages[2]["name"] == "python" and messages[2]["content"].strip() == "42"
        assert messages[3]["content"] == "so \\boxed{42}" and row["solution"] == "so \\boxed{42}"
        assert row["tool_calls"] == 1
        assert [schema["function"]["name"] for schema in json.loads(row["tools"])] == ["python"]


def test_the_kept_rows_are_sft_data_with_the_tool_result_masked(kept_rows, tmp_path):
    from basics.atomic_files import read_jsonl, write_jsonl
    from recipes.common.data import kept_rows_as_conversations

    kept, _, tokenizer = kept_rows
    write_jsonl(tmp_path / "dataset.jsonl", kept)  # as a round writes them, and reads them back on a rerun
    dataset = kept_rows_as_conversations(read_jsonl(tmp_path / "dataset.jsonl"), "round_1/dataset.jsonl")
    assert set(dataset.column_names) == {"messages", "tools"}
    row = dataset[0]
    # what SFTTrainer does with a row (its tokenize_fn): the template with the row's tools, the assistant mask
    rendered = tokenizer.apply_chat_template(
        row["messages"], tools=json.loads(row["tools"]), tokenize=True, return_dict=True,
        return_assistant_tokens_mask=True,
    )  # fmt: skip
    ids, mask = rendered["input_ids"], rendered["assistant_masks"]
    trained = tokenizer.decode([token for token, on in zip(ids, mask, strict=True) if on])
    untrained = tokenizer.decode([token for token, on in zip(ids, mask, strict=True) if not on])
    assert "print(" in trained and "so \\boxed{42}" in trained
    assert "<tool_response>42" in untrained and "42" not in trained.replace("so \\boxed{42}", "")


def test_a_misspelt_tool_is_one_line_when_the_options_are_read():
    from recipes.common.traces import TraceArguments

    with pytest.raises(ValueError, match="unknown tool 'pyhton'"):
        TraceArguments(tools=["pyhton"])
    assert TraceArguments().tools == []  # no tools: the text sampler, as before


def test_a_round_trains_tool_traces_with_the_tool_template_and_the_assistant_mask(tiny_model_dir):
    from types import SimpleNamespace

    from recipes.stages.rejection_sampling.rounds import sft_tokenizer

    tools, model_args = SimpleNamespace(tools=["python"]), SimpleNamespace(model_revision=None)
    with pytest.raises(ValueError, match="assistant_only_loss: true"):
        sft_tokenizer(tools, str(tiny_model_dir), SimpleNamespace(assistant_only_loss=False), model_args)
    tokenizer = sft_tokenizer(tools, str(tiny_model_dir), SimpleNamespace(assistant_only_loss=True), model_args)
    assert "<tool_response>" in tokenizer.chat_template
    plain = sft_tokenizer(SimpleNamespace(tools=[]), str(tiny_model_dir), SimpleNamespace(), model_args)
    assert "<tool_response>" not in plain.chat_template  # without tools: the model's own, as before
