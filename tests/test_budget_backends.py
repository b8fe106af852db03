"""The pieces of test-time scaling that sit beside the budget driver: the continuation primitive on both
backends (vLLM against a stand-in: no GPU here), chat-template arguments, /think and /no_think switches in
evaluation prompts and in SFT data (Qwen3's mix of thinking and non-thinking examples)."""

from __future__ import annotations

import sys
import types

import pytest
import torch

from eval.budget import BudgetForcing, BudgetSampler, with_thinking_switch
from eval.continuation import ContinuationRequest, SuppressTokens, cut_continuation
from eval.sampler import SamplingParams, TransformersSampler, make_sampler, render_prompts

PROMPT = [{"role": "user", "content": "a=1 b=a. Find b."}]
THINKING_TEMPLATE = (  # a Qwen3-like template: enable_thinking=false closes an empty thinking block for the model
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|eos|>{% endfor %}<|assistant|>"
    "{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n{% endif %}"
)


def ids(tokenizer, text):
    return tokenizer.encode(text, add_special_tokens=False)


def test_a_continuation_ends_at_eos_at_a_one_token_stop_or_at_length(tiny_tokenizer):
    eos, pad, think_end = tiny_tokenizer.eos_token_id, tiny_tokenizer.pad_token_id, ids(tiny_tokenizer, "</think>")[0]
    at_eos = cut_continuation(tiny_tokenizer, ids(tiny_tokenizer, "ab") + [eos, pad], {eos}, think_end, "</think>")
    assert (at_eos.text, at_eos.num_tokens, at_eos.ended) == ("ab", 3, "eos")
    at_stop = cut_continuation(
        tiny_tokenizer, ids(tiny_tokenizer, "abc") + [think_end, pad], {eos}, think_end, "</think>"
    )
    assert (at_stop.text, at_stop.num_tokens, at_stop.ended) == ("abc", 4, "</think>")
    full = cut_continuation(tiny_tokenizer, ids(tiny_tokenizer, "abcd"), {eos}, think_end, "</think>")
    assert (full.text, full.num_tokens, full.ended) == ("abcd", 4, "length")


def test_a_stop_spelt_over_several_tokens_is_found_in_the_text(tiny_tokenizer):
    eos = tiny_tokenizer.eos_token_id
    tokens = ids(tiny_tokenizer, "xyEND tail") + [eos]  # "END" is three tokens for the character-level tokenizer
    cut = cut_continuation(tiny_tokenizer, tokens, {eos}, None, "END")
    assert (cut.text, cut.num_tokens, cut.ended) == ("xy", 5, "END")


def test_suppressed_tokens_can_never_be_drawn():
    scores = torch.tensor([[5.0, 1.0, 9.0], [0.0, 7.0, 1.0]])
    out = SuppressTokens([2, 1])(None, scores)
    assert out.argmax(-1).tolist() == [0, 0] and torch.isinf(out[:, 1:]).all() and scores[0, 2] == 9.0


def test_transformers_extend_suppresses_eos_and_the_end_of_thinking(tiny_model, tiny_tokenizer):
    """The tiny model's logits are pushed (a hook on its output layer) to want only EOS and </think> next:
    free, it stops at once; held open, it writes its full length with neither, nor any other special token."""
    sampler = TransformersSampler(tiny_model, tiny_tokenizer)
    eos, think_end = tiny_tokenizer.eos_token_id, ids(tiny_tokenizer, "</think>")[0]

    def push(module, inputs, output):
        output = output.clone()
        output[..., eos] += 50.0
        output[..., think_end] += 60.0
        output[..., tiny_tokenizer.pad_token_id] += 40.0  # the next choice: banned too when held open
        return output

    handle = tiny_model.lm_head.register_forward_hook(push)
    try:
        params = SamplingParams(temperature=0.0)
        free = sampler.extend(ContinuationRequest(["<|user|>x<|eos|><|assistant|>"], [0], params, 5, "</think>"))[0]
        assert (free.text, free.num_tokens, free.ended) == ("", 1, "</think>")
        held_open = ContinuationRequest(["<|user|>x<|eos|><|assistant|>"], [0], params, 5, "</think>", suppress=True)
        held = sampler.extend(held_open)[0]
        assert held.ended == "length" and held.num_tokens == 5
        assert len(ids(tiny_tokenizer, held.text)) == 5 and "</think>" not in held.text  # 5 visible tokens
    finally:
        handle.remove()


def test_vllm_extend_builds_stop_and_min_tokens_requests(monkeypatch, tiny_tokenizer):
    """No GPU here: vLLM's glue is checked against a stand-in with its interface (untested on a real vLLM)."""
    seen = {}

    class FakeLLM:
        def __init__(self, **kwargs):
            pass

        def get_tokenizer(self):
            return tiny_tokenizer

        def generate(self, prompts, requests, use_tqdm=True):
            seen["prompts"], seen["requests"] = prompts, requests
            outputs = [
                types.SimpleNamespace(text="ab</think>", token_ids=[1, 2, 3], finish_reason="stop", stop_reason=think),
                types.SimpleNamespace(text="abc", token_ids=[1, 2, 3, 4], finish_reason="stop", stop_reason="</think>"),
                types.SimpleNamespace(text="ab", token_ids=[1, 2, 3], finish_reason="stop", stop_reason=None),
                types.SimpleNamespace(text="abcde", token_ids=[1] * 5, finish_reason="length", stop_reason=None),
            ]
            return [types.SimpleNamespace(outputs=[output]) for output in outputs[: len(prompts)]]

    think = ids(tiny_tokenizer, "</think>")[0]
    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=FakeLLM, SamplingParams=lambda **kw: kw))
    sampler = make_sampler("vllm", "some/model", chat_template_kwargs={"enable_thinking": True})
    assert sampler.chat_template_kwargs == {"enable_thinking": True}
    params = SamplingParams(temperature=0.7, top_p=0.9, seed=3)
    texts = ["<|assistant|>a", "<|assistant|>b", "<|assistant|>c", "<|assistant|>d"]
    out = sampler.extend(ContinuationRequest(texts, [11, 12, 13, 14], params, 9, "</think>"))
    assert seen["prompts"][0] == {"prompt_token_ids": ids(tiny_tokenizer, "<|assistant|>a")}  # no second BOS
    first = seen["requests"][0]
    assert (first["max_tokens"], first["min_tokens"], first["stop"], first["stop_token_ids"], first["seed"]) == (
        9, 0, ["</think>"], [think], 11,
    )  # fmt: skip
    assert [(c.text, c.num_tokens, c.ended) for c in out] == [
        ("ab", 3, "</think>"), ("abc", 4, "</think>"), ("ab", 3, "eos"), ("abcde", 5, "length"),
    ]  # fmt: skip
    sampler.extend(ContinuationRequest(texts[:1], [5], params, 4, "</think>", suppress=True))
    held = seen["requests"][0]
    assert (held["min_tokens"], held["max_tokens"], held["stop"]) == (4, 4, None)
    # held open, EOS, </think> and the other special tokens (pad, role markers) are banned through min_tokens
    roles = ids(tiny_tokenizer, "<|system|><|user|><|assistant|>")
    assert held["stop_token_ids"] == sorted({*tiny_tokenizer.all_special_ids, *roles, think})
    assert (
        tiny_tokenizer.eos_token_id in held["stop_token_ids"] and tiny_tokenizer.pad_token_id in held["stop_token_ids"]
    )


def test_chat_template_kwargs_reach_the_template_and_a_closed_thinking_is_not_forced(tiny_model, tiny_tokenizer):
    rendered = render_prompts(tiny_tokenizer, [PROMPT], THINKING_TEMPLATE, template_kwargs={"enable_thinking": False})
    assert rendered[0].endswith("<|assistant|><think>\n\n</think>\n")
    assert not render_prompts(tiny_tokenizer, [PROMPT], THINKING_TEMPLATE)[0].endswith("</think>\n")
    sampler = TransformersSampler(
        tiny_model, tiny_tokenizer, chat_template=THINKING_TEMPLATE, chat_template_kwargs={"enable_thinking": False}
    )
    params = SamplingParams(n=2, temperature=1.0, seed=0)
    samples = BudgetSampler(sampler, BudgetForcing(budget=2, answer_tokens=5)).generate([PROMPT], params, ["a"])[0]
    assert all(not s.forced_answer and s.thinking_tokens == 0 and s.num_tokens <= 2 + 5 for s in samples)


def test_thinking_switch_ends_the_last_user_turn_and_replaces_an_old_switch():
    prompt = [{"role": "system", "content": "s"}, {"role": "user", "content": "q /think"}]
    assert with_thinking_switch(prompt, "no_think")[-1]["content"] == "q /no_think"
    assert prompt[-1]["content"] == "q /think"  # the row's own prompt is left alone
    assert with_thinking_switch(prompt, None) is prompt
    with pytest.raises(ValueError, match="user turn"):
        with_thinking_switch([{"role": "system", "content": "s"}], "think")


def test_evaluate_records_template_kwargs_and_switch_in_its_protocol():
    from eval.evaluate import parse_args

    args = parse_args(
        ["--model", "m", "--dataset", "d", "--output-dir", "o", "--chat-template-kwargs", '{"enable_thinking": false}',
         "--thinking-mode", "no_think", "--budgets", "8", "16", "--min-thinking-tokens", "4"]
    )  # fmt: skip
    assert args.chat_template_kwargs == {"enable_thinking": False} and args.thinking_mode == "no_think"
    assert args.budgets == [8, 16] and args.min_thinking_tokens == 4
    with pytest.raises(SystemExit):  # a minimum above a budget cannot be met
        parse_args(
            ["--model", "m", "--dataset", "d", "--output-dir", "o", "--budgets", "8", "--min-thinking-tokens", "9"]
        )


# ---------------------------------------------------------------- SFT data: a thinking_mode column per row


def sft_rows(count=40):
    from datasets import Dataset

    from tasks.synthetic import generate_rows

    return Dataset.from_list(generate_rows([2], count, seed=1))


def test_sft_data_mixes_thinking_and_non_thinking_rows():
    from recipes.common.data import to_sft_conversations

    rows = sft_rows()
    mixed = to_sft_conversations(rows, "synthetic", no_think_fraction=0.5, thinking_switch=True)
    modes = mixed["thinking_mode"]
    assert set(modes) == {"think", "no_think"} and 8 <= modes.count("no_think") <= 32  # ~half of 40
    for row, source in zip(mixed, rows, strict=True):
        user, assistant = row["messages"][-2], row["messages"][-1]
        answer = source["solution"].split("</think>")[1]
        if row["thinking_mode"] == "no_think":
            assert user["content"].endswith(" /no_think") and assistant["content"] == "<think>\n\n</think>" + answer
            assert row["chat_template_kwargs"] == {"enable_thinking": False}
        else:
            assert user["content"].endswith(" /think") and assistant["content"] == source["solution"]
    again = to_sft_conversations(rows, "synthetic", no_think_fraction=0.5)
    assert again["thinking_mode"] == modes  # chosen by id: the same rows every time
    assert "thinking_mode" not in to_sft_conversations(rows, "synthetic").column_names  # off by default


def test_a_thinking_mode_column_in_the_data_decides(tiny_model_dir, tmp_path):
    from recipes.common.data import to_sft_conversations

    rows = sft_rows(4)
    rows = rows.add_column("thinking_mode", ["no_think", "think", "think", "no_think"])
    out = to_sft_conversations(rows, "synthetic")
    assert out["thinking_mode"] == ["no_think", "think", "think", "no_think"]
    assert out[0]["messages"][-1]["content"].startswith("<think>\n\n</think>")
    with pytest.raises(ValueError, match="thinking_mode"):
        to_sft_conversations(rows.remove_columns("thinking_mode").add_column("thinking_mode", ["x"] * 4), "s")


def test_sft_trains_on_a_mixed_set(tiny_model_dir, tmp_path):

    from recipes import sft

    argv = [
        "--model_name_or_path", str(tiny_model_dir), "--output_dir", str(tmp_path / "sft"), "--max_steps", "2",
        "--dataset_num_rows", "8", "--save_strategy", "no", "--no_think_fraction", "0.5", "--thinking_switch", "true",
    ]  # fmt: skip
    parsed = sft.make_parser().parse_args(argv)
    assert parsed[0].no_think_fraction == 0.5 and parsed[0].thinking_switch
    assert (sft.main(*parsed) / "config.json").exists()
