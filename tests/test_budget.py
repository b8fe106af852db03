"""eval/budget.py: s1 budget forcing (down: a forced answer at the budget; up: Wait and suppression before a
minimum), checked on a scripted backend whose every round is known, then on the tiny model, then end to end
through `python -m eval.evaluate --budgets`."""

from __future__ import annotations

import json

import pytest

from eval import evaluate
from eval.budget import BudgetForcing, BudgetSampler
from eval.continuation import Continuation, ContinuationRequest
from eval.sampler import SamplingParams, TransformersSampler

PROMPT = [{"role": "user", "content": "a=1 b=a. Find b."}]
ANSWER_PROMPT = "\n\\boxed{"


class ScriptedBackend:
    """A backend whose `extend` follows a script: while thinking (the request stops at </think>) it ends its
    thinking after `think` characters; in the answer it writes "7}" and EOS; a suppressed round fills its
    length. Every request is logged. The tiny tokenizer is character level: one character, one token."""

    def __init__(self, tokenizer, think: int = 3, stop_with: str = "</think>"):
        self.tokenizer, self.think, self.stop_with = tokenizer, think, stop_with
        self.requests: list[tuple] = []

    def render(self, prompts):
        return ["<|user|>" + prompt[-1]["content"] + "<|eos|><|assistant|>" for prompt in prompts]

    def extend(self, request: ContinuationRequest):
        max_new_tokens, stop, suppress = request.max_new_tokens, request.stop, request.suppress
        self.requests.append((max_new_tokens, stop, suppress))
        out = []
        for _ in request.texts:
            if suppress:
                out.append(Continuation("y" * max_new_tokens, max_new_tokens, "length"))
            elif stop is None:  # the answer
                out.append(Continuation("7}"[:max_new_tokens], min(3, max_new_tokens), "eos"))
            elif self.think >= max_new_tokens:
                out.append(Continuation("x" * max_new_tokens, max_new_tokens, "length"))
            else:
                ended = "eos" if self.stop_with == "eos" else stop
                out.append(Continuation("x" * self.think, self.think + 1, ended))
        return out


def one_sample(backend, **forcing):
    sampler = BudgetSampler(backend, BudgetForcing(**forcing))
    return sampler.generate([PROMPT], SamplingParams(n=1, max_new_tokens=50), ["p"])[0][0]


def test_reaching_the_budget_forces_end_of_thinking_and_a_boxed_answer(tiny_tokenizer):
    backend = ScriptedBackend(tiny_tokenizer, think=100)
    sample = one_sample(backend, budget=8, answer_tokens=5)
    # 8 thinking tokens, then "</think>" (one token) and "\n\boxed{" (8 characters) forced, then "7}" + EOS
    assert sample.text == "x" * 8 + "</think>" + ANSWER_PROMPT + "7}"
    assert (sample.thinking_tokens, sample.forced_answer, sample.waits) == (8, True, 0)
    assert sample.num_tokens == 8 + 1 + 8 + 3 and sample.finish_reason == "stop"
    assert backend.requests == [(8, "</think>", False), (5, None, False)]  # the answer gets the allowance


def test_thinking_to_max_new_tokens_without_a_budget_ends_the_sample(tiny_tokenizer):
    # Forcing upward only (a minimum, no budget): a row still thinking at max_new_tokens is finished with
    # finish "length". It used to stay "thinking" and the next request recursed for ever (RecursionError),
    # which only the CPU kernels whose samples reach the cap showed: the scripted backend reaches it always.
    backend = ScriptedBackend(tiny_tokenizer, think=100)
    sampler = BudgetSampler(backend, BudgetForcing(min_thinking_tokens=10))
    sample = sampler.generate([PROMPT], SamplingParams(n=1, max_new_tokens=20), ["p"])[0][0]
    assert sample.text == "x" * 20 and sample.finish_reason == "length"
    assert (sample.thinking_tokens, sample.forced_answer, sample.waits) == (20, False, 0)
    assert backend.requests == [(20, "</think>", False)]


def test_thinking_that_ends_before_the_budget_is_not_forced(tiny_tokenizer):
    backend = ScriptedBackend(tiny_tokenizer, think=3)
    sample = one_sample(backend, budget=8, answer_tokens=5)
    assert sample.text == "xxx</think>7}" and not sample.forced_answer and sample.thinking_tokens == 3
    assert backend.requests == [(8, "</think>", False), (8 - 3 + 5, None, False)]  # unused budget goes to the answer


def test_an_early_end_becomes_wait_then_is_suppressed_up_to_the_minimum(tiny_tokenizer):
    backend = ScriptedBackend(tiny_tokenizer, think=2)
    sample = one_sample(backend, budget=40, min_thinking_tokens=10, max_waits=1)
    # xx (stop dropped) + Wait -> 6 thinking tokens; no Wait left: 4 tokens with the end suppressed; then free
    assert sample.text == "xx" + "Wait" + "yyyy" + "xx" + "</think>" + "7}"
    assert (sample.thinking_tokens, sample.waits, sample.forced_answer) == (12, 1, False)
    assert backend.requests == [
        (40, "</think>", False),
        (4, "</think>", True),
        (30, "</think>", False),
        (40 - 12 + 16, None, False),
    ]


def test_an_early_eos_inside_thinking_also_becomes_wait(tiny_tokenizer):
    sample = one_sample(ScriptedBackend(tiny_tokenizer, think=2, stop_with="eos"), min_thinking_tokens=9, max_waits=3)
    assert sample.text.startswith("xxWaitxxWaitxx") and sample.waits == 2 and sample.thinking_tokens >= 9


def test_without_the_minimum_an_early_eos_ends_the_sample(tiny_tokenizer):
    sample = one_sample(ScriptedBackend(tiny_tokenizer, think=2, stop_with="eos"), budget=20)
    assert (sample.text, sample.finish_reason, sample.forced_answer) == ("xx", "stop", False)


def test_a_prompt_that_already_closed_its_thinking_starts_in_the_answer(tiny_tokenizer):
    backend = ScriptedBackend(tiny_tokenizer, think=100)
    backend.render = lambda prompts: ["<|assistant|><think>\n\n</think>\n\n"]
    sample = one_sample(backend, budget=4, answer_tokens=6)
    assert sample.text == "7}" and not sample.forced_answer and sample.thinking_tokens == 0
    assert backend.requests == [(4 + 6, None, False)]


def test_an_end_of_thinking_found_inside_the_text_ends_the_thinking_there(tiny_tokenizer):
    """A stop spelt over several tokens cannot be banned; when it shows up in the text, thinking ends there."""
    backend = ScriptedBackend(tiny_tokenizer)
    script = iter([Continuation("ab</think>zz", 7, "length"), Continuation("7}", 3, "eos")])
    backend.extend = lambda request: [next(script)]
    sample = one_sample(backend, budget=20)
    assert sample.text == "ab</think>7}" and not sample.forced_answer
    assert (sample.thinking_tokens, sample.num_tokens) == (2, 2 + 1 + 3)  # "zz" dropped: 3 tokens, not 7


@pytest.mark.parametrize("bad", [{"budget": 0}, {"budget": 4, "min_thinking_tokens": 5}, {"answer_tokens": 0}])
def test_impossible_forcing_is_refused(bad):
    with pytest.raises(ValueError):
        BudgetForcing(**bad)


# ---------------------------------------------------------------- on the tiny model (transformers backend)


@pytest.fixture(scope="module")
def trained_sampler(trained_tiny_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(trained_tiny_model_dir)
    return TransformersSampler(model, AutoTokenizer.from_pretrained(trained_tiny_model_dir), batch_size=64)


def level_one_prompts(count: int = 3):
    from tasks.synthetic import generate_rows

    rows = generate_rows([1], count, seed=3, split="eval")
    return [row["prompt"] for row in rows], [row["id"] for row in rows]


def thinking_length(tokenizer, text: str) -> int:
    """Tokens before the first </think> (the whole text when there is none): counted here, not by the sampler."""
    return len(tokenizer.encode(text.split("</think>")[0], add_special_tokens=False))


PARAMS = SamplingParams(n=4, temperature=1.0, max_new_tokens=60, seed=0)


def test_forcing_upward_yields_no_end_of_thinking_before_the_minimum(trained_sampler):
    tokenizer = trained_sampler.tokenizer
    prompts, keys = level_one_prompts()
    plain = [s for samples in trained_sampler.generate(prompts, PARAMS, keys) for s in samples]
    assert min(thinking_length(tokenizer, s.text) for s in plain) < 24  # left alone, the model stops early
    for max_waits in (1, 0):  # Wait once then suppression; suppression alone
        forcing = BudgetForcing(min_thinking_tokens=24, max_waits=max_waits, answer_tokens=8)
        samples = [
            s for group in BudgetSampler(trained_sampler, forcing).generate(prompts, PARAMS, keys) for s in group
        ]
        for sample in samples:
            assert thinking_length(tokenizer, sample.text) >= 24, sample.text  # no </think> and no EOS before 24
            assert sample.thinking_tokens >= 24 and sample.waits <= max_waits
        if max_waits:
            assert sum(s.waits for s in samples) > 0 and "Wait" in samples[0].text


def test_forcing_an_answer_always_leaves_a_boxed_answer_position(trained_sampler):
    tokenizer = trained_sampler.tokenizer
    prompts, keys = level_one_prompts()
    forcing = BudgetForcing(budget=3, answer_tokens=4)
    samples = [s for group in BudgetSampler(trained_sampler, forcing).generate(prompts, PARAMS, keys) for s in group]
    for sample in samples:  # no level-1 chain fits in 3 tokens: every sample is forced
        assert sample.forced_answer and sample.thinking_tokens == 3
        assert thinking_length(tokenizer, sample.text) == 3
        thinking, _, answer = sample.text.partition("</think>")
        assert answer.startswith("\n\\boxed{"), sample.text
        assert sample.num_tokens <= 3 + len(tokenizer.encode("</think>\n\\boxed{", add_special_tokens=False)) + 4


def test_budget_samples_do_not_depend_on_batch_size(trained_tiny_model_dir, trained_sampler):
    small = TransformersSampler(trained_sampler.model, trained_sampler.tokenizer, batch_size=3)
    prompts, keys = level_one_prompts()
    forcing = BudgetForcing(budget=10, min_thinking_tokens=6, answer_tokens=6)
    one = BudgetSampler(trained_sampler, forcing).generate(prompts, PARAMS, keys)
    other = BudgetSampler(small, forcing).generate(prompts[::-1], PARAMS, keys[::-1])[::-1]
    assert one == other


# ---------------------------------------------------------------- python -m eval.evaluate --budgets


def test_a_budget_sweep_writes_the_curve_and_the_forced_answer_counts(trained_tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "sweep"
    argv = [
        "--model", str(trained_tiny_model_dir), "--dataset", "synthetic:2-3", "--num-rows", "3", "--n", "4",
        "--k", "1", "4", "--temperature", "1.0", "--top-p", "1.0", "--backend", "transformers",
        "--output-dir", str(out), "--budgets", "2", "8", "32", "--answer-tokens", "8",
    ]  # fmt: skip
    curves = evaluate.main(argv)
    curve = json.loads((out / "budget_curve" / "synthetic_2-3.json").read_text())
    assert curve == curves["synthetic_2-3"] and list(curve) == ["2", "8", "32"]
    assert (out / "budget_curve" / "synthetic_2-3.png").stat().st_size > 0
    for budget, point in curve.items():
        samples = [json.loads(line) for line in (out / f"budget_{budget}" / "synthetic_2-3" / "samples.jsonl").open()]
        assert point["samples"] == len(samples) == 6 * 4
        assert point["forced_answers"] == sum(s["forced_answer"] for s in samples)
        assert all(s["thinking_tokens"] <= int(budget) for s in samples)
        summary = json.loads((out / f"budget_{budget}" / "synthetic_2-3" / "summary.json").read_text())
        assert point["metrics"]["pass@1"] == summary["metrics"]["pass@1"]
        assert summary["protocol"]["forcing"]["budget"] == int(budget)
    # a level-2 chain takes more than 2 tokens: all forced at 2; at 32 tokens the chains fit
    assert curve["2"]["forced_answers"] == 24 and curve["32"]["forced_answers"] < 24
    assert "| synthetic_2-3 | 32 |" in capsys.readouterr().out


def test_a_sweep_refuses_to_resume_under_another_forcing(trained_tiny_model_dir, tmp_path):
    base = [
        "--model", str(trained_tiny_model_dir), "--dataset", "synthetic:1", "--num-rows", "1", "--n", "1",
        "--backend", "transformers", "--output-dir", str(tmp_path), "--budgets", "4",
    ]  # fmt: skip
    evaluate.main(base)
    with pytest.raises(SystemExit, match="another protocol"):
        evaluate.main([*base, "--answer-tokens", "3"])
