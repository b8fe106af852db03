"""data_filters/pass_rate.py: pass rates from the row's own verifier, the window and Kimi keep rules, Qwen3's
no-thinking rule, several rewards per row, and rows that cannot be scored.

Two samplers: a scripted one, whose completions are fixed, so every pass rate and reward total below is
computed by hand; and the tiny model, trained for a few seconds to answer "\\boxed{7}" or "\\boxed{3}" at
random whatever the question (tests/support/guessing_model.py), so that real sampling and real verification
give pass rates near 1/2 for rows whose gold is 7 or 3 and exactly 0 for the others.
"""

from __future__ import annotations

import json
import math
import re

import pytest
from datasets import Dataset

from data_filters.pass_rate import (
    DEFAULT_NO_THINK_TEMPLATE,
    add_pass_rates,
    keep_by_pass_rate,
    measure_pass_rates,
    no_think_filter,
    pass_rate_filter,
)
from eval.sampler import Sample, SamplingParams
from tasks.rows import build_prompt
from tests.conftest import build_once
from tests.support.guessing_model import build_guessing_model


class ScriptedSampler:
    """`generate` returns, for each prompt, the scripted (text, num_tokens) list of its question."""

    def __init__(self, script: dict[str, list[tuple[str, int]]]):
        self.script = script
        self.prompts_seen: list = []

    def generate(self, prompts, params, keys=None):
        self.prompts_seen += prompts
        out = []
        for prompt in prompts:
            content = prompt[-1]["content"] if isinstance(prompt, list) else prompt
            texts = self.script[content]
            assert len(texts) >= params.n, f"script has {len(texts)} samples for {content!r}, asked {params.n}"
            out.append([Sample(text, tokens, "stop") for text, tokens in texts[: params.n]])
        return out


def row(question: str, answer: str | None = None, **extra) -> dict:
    return {
        "id": question,
        "problem": question,
        "prompt": build_prompt(question),
        "answer": answer,
        "verifier": "math",
    } | extra


# Five rows: 0, 1, 4 and 2 correct out of 4, and a code row whose tests the verifier cannot read.
SCRIPT = {
    "q0": [("\\boxed{1}", 3), ("\\boxed{2}", 3), ("no box", 3), ("<think>\\boxed{5}", 3)],  # unclosed think: wrong
    "q1": [("\\boxed{5}", 3), ("\\boxed{6}", 3), ("\\boxed{7}", 3), ("\\boxed{5} \\boxed{6}", 3)],  # two answers: wrong
    "q4": [("\\boxed{5}", 3), ("<think>x</think>\\boxed{5}", 3), ("\\boxed{\\frac{10}{2}}", 3), ("\\boxed{05}", 3)],
    "q2": [("\\boxed{5}", 3), ("\\boxed{4}", 3), ("\\boxed{5.0}", 3), ("\\boxed{}", 3)],
    "code": [("```python\nprint(1)\n```", 3)] * 4,
}


@pytest.fixture
def scripted_rows():
    rows = [row(q, "5") for q in ("q0", "q1", "q4", "q2")]
    rows.append(row("code", None, verifier="code", tests="{not json"))
    return rows


def test_pass_rates_from_the_verifier_and_unscorable_rows(scripted_rows):
    sampler = ScriptedSampler(SCRIPT)
    measured = measure_pass_rates(scripted_rows, sampler, SamplingParams(n=4), progress=False, keep_samples=True)
    assert [entry["pass_count"] for entry in measured] == [0, 1, 4, 2, 0]
    assert [entry["pass_rate"] for entry in measured] == [0.0, 0.25, 1.0, 0.5, None]
    assert [entry["pass_n"] for entry in measured] == [4, 4, 4, 4, 0]
    assert measured[4]["unscorable"].startswith("cannot be scored")
    assert all(entry["unscorable"] is None for entry in measured[:4])
    assert [s["correct"] for s in measured[3]["samples"]] == [True, False, True, False]
    # the unscorable row was never sampled
    assert [prompt[-1]["content"] for prompt in sampler.prompts_seen] == ["q0", "q1", "q4", "q2"]


def test_a_gold_that_fails_against_itself_gets_no_pass_rate():
    rows = [
        row("q", "5"),
        row("bad", "\uff14\uff12"),
    ]  # full-width digits: the verifier refuses them even from the gold
    measured = measure_pass_rates(
        rows, ScriptedSampler({"q": [("\\boxed{5}", 1)]}), SamplingParams(n=1), progress=False
    )
    assert measured[0]["pass_rate"] == 1.0
    assert measured[1]["pass_rate"] is None and measured[1]["unscorable"]


def test_window_and_kimi_keep_rules_with_reasons(scripted_rows):
    dataset, histogram = add_pass_rates(Dataset.from_list(scripted_rows), ScriptedSampler(SCRIPT), SamplingParams(n=4))
    assert dataset["pass_rate"] == [0.0, 0.25, 1.0, 0.5, None]
    assert histogram == {"0": 1, "(0, 0.25]": 1, "(0.25, 0.5]": 1, "1": 1, "unscorable": 1}

    kimi, report = keep_by_pass_rate(dataset, rule="kimi")
    assert kimi["id"] == ["q0"]
    assert report.rows_in == 5 and report.rows_out == 1 and report.dropped == 4
    assert report.reasons["solved at least once (kimi: keep only problems all samples fail)"] == 3
    assert sum(report.reasons.values()) == 4  # the 5th: cannot be scored

    window, report = keep_by_pass_rate(dataset, rule="window", lo=0.25, hi=0.5)
    assert window["id"] == ["q1", "q2"]
    assert report.reasons["pass rate below 0.25"] == 1 and report.reasons["pass rate above 0.5"] == 1

    everything, _ = keep_by_pass_rate(dataset, rule="window")
    assert everything["id"] == ["q0", "q1", "q4", "q2"]  # [0, 1] keeps every scorable row

    tagged, report = keep_by_pass_rate(dataset, rule="kimi", mode="tag")
    assert len(tagged) == 5 and tagged["pass_rate_kept"] == [True, False, False, False, False]
    assert report.flagged == 4

    with pytest.raises(ValueError, match="keep rule"):
        keep_by_pass_rate(dataset, rule="best")
    with pytest.raises(ValueError, match="lo <= hi"):
        keep_by_pass_rate(dataset, lo=0.8, hi=0.2)


def test_several_rewards_per_row_are_summed_like_trl():
    # Hand-computed totals: math_accuracy (w 1) + think_format (w 0.5) + overlong (w 1, max_len 10, buffer 5:
    # 0 up to 5 tokens, then (5 - len) / 5 down to -1 at 10, -1 beyond).
    script = {
        "A": [
            ("<think>a</think>\\boxed{5}", 4),
            ("\\boxed{5}", 8),
            ("<think>b</think>\\boxed{6}", 3),
            ("no answer", 12),
        ],
        "B": [
            ("<think>c</think>\\boxed{8}", 2),
            ("<think>c</think>\\boxed{8}", 10),
            ("\\boxed{9}", 2),
            ("\\boxed{8}", 2),
        ],
    }
    rewards = [
        {"name": "math_accuracy", "weight": 1.0},
        {"name": "think_format", "weight": 0.5},
        {"name": "overlong", "weight": 1.0, "max_len": 10, "buffer": 5},
    ]
    rows = [row("A", "5"), row("B", "8")]
    expected_totals = [[1.5, 0.4, 0.5, -1.0], [1.5, 0.5, 0.0, 1.0]]
    for chunk_size in (1, 64):  # one row per reward call, or both rows in one call: the same numbers
        measured = measure_pass_rates(
            rows, ScriptedSampler(script), SamplingParams(n=4), rewards=rewards, chunk_size=chunk_size,
            progress=False, keep_samples=True,
        )  # fmt: skip
        for entry, totals in zip(measured, expected_totals, strict=True):
            assert [s["reward"] for s in entry["samples"]] == pytest.approx(totals)
            mean = sum(totals) / 4
            assert entry["reward_mean"] == pytest.approx(mean)
            assert entry["reward_std"] == pytest.approx(math.sqrt(sum((t - mean) ** 2 for t in totals) / 4))
        assert [entry["pass_rate"] for entry in measured] == [0.5, 0.75]  # the verifier decides without a threshold

    measured = measure_pass_rates(
        rows, ScriptedSampler(script), SamplingParams(n=4), rewards=rewards, success_threshold=1.0, progress=False
    )
    assert [entry["pass_rate"] for entry in measured] == [0.25, 0.5]  # totals >= 1.0: [1.5] and [1.5, 1.0]
    with pytest.raises(ValueError, match="success_threshold"):
        measure_pass_rates(rows, ScriptedSampler(script), SamplingParams(n=4), success_threshold=1.0)


def test_no_think_rule_asks_directly_and_drops_what_it_solves():
    def direct(question: str) -> str:
        return DEFAULT_NO_THINK_TEMPLATE.replace("{problem}", question)

    script = {
        direct("easy"): [("\\boxed{5}", 2), ("\\boxed{5}", 2)],
        direct("lucky"): [("\\boxed{1}", 2), ("\\boxed{5}", 2)],
        direct("hard"): [("\\boxed{1}", 2), ("\\boxed{2}", 2)],
    }
    rows = [row(q, "5", prompt=build_prompt(q, "Think step by step.")) for q in ("easy", "lucky", "hard")]
    sampler = ScriptedSampler(script)
    kept, report = no_think_filter(Dataset.from_list(rows), sampler, SamplingParams(n=2, max_new_tokens=16))
    assert kept["id"] == ["hard"]
    assert report.flagged == 2 and report.rows_out == 1
    # the no-thinking prompt replaced the row's own (its system prompt included)
    assert all(
        len(prompt) == 1 and prompt[0]["content"].startswith(q)
        for prompt, q in zip(sampler.prompts_seen, ["easy", "lucky", "hard"], strict=True)
    )
    kept, _ = no_think_filter(Dataset.from_list(rows), ScriptedSampler(script), SamplingParams(n=2), threshold=0.5)
    assert kept["id"] == ["lucky", "hard"]  # solved half the time is not above 0.5
    assert kept["no_think_pass_rate"] == [0.5, 0.0]


# ---------------------------------------------------------------- the tiny model, really sampled and verified


@pytest.fixture(scope="module")
def guessing_model_dir(shared_dir, tiny_model_dir):
    return build_once(shared_dir, "tiny-guessing", lambda target: build_guessing_model(target, tiny_model_dir))


def boxed_number(text: str) -> str | None:
    found = re.findall(r"\\boxed\{(\d+)\}", text)
    return found[-1] if found else None


def test_real_sampling_with_the_tiny_model(guessing_model_dir, tiny_tokenizer):
    from transformers import AutoModelForCausalLM

    from eval.sampler import TransformersSampler
    from tasks.synthetic import generate_rows

    guessing_model = AutoModelForCausalLM.from_pretrained(guessing_model_dir)
    rows = generate_rows([1, 2], 3, seed=5)
    for r, answer in zip(rows, ["7", "3", "42", "7", "42", "3"], strict=True):
        r["answer"] = answer
    sampler = TransformersSampler(guessing_model, tiny_tokenizer, batch_size=32)
    params = SamplingParams(n=16, temperature=1.0, max_new_tokens=12, seed=0)
    measured = measure_pass_rates(rows, sampler, params, progress=False, keep_samples=True)
    for r, entry in zip(rows, measured, strict=True):
        # independent count: the last \boxed{number} equals the gold
        expected = sum(boxed_number(s["text"]) == r["answer"] for s in entry["samples"])
        assert entry["pass_count"] == expected and entry["pass_n"] == 16
        if r["answer"] == "42":
            assert entry["pass_rate"] == 0.0
        else:
            assert 0.1 < entry["pass_rate"] < 0.9, entry  # the model says 7 or 3 about half the time each

    dataset = Dataset.from_list(rows)
    kimi, report = pass_rate_filter(dataset, sampler, params, rule="kimi", progress=False)
    assert kimi["answer"] == ["42", "42"] and report.dropped == 4
    window, _ = pass_rate_filter(dataset, sampler, params, rule="window", lo=0.05, hi=0.95, progress=False)
    assert window["answer"] == ["7", "3", "7", "3"]
    # the model answers the same way without thinking: every row it can solve is solved without reasoning
    direct = SamplingParams(n=8, temperature=1.0, max_new_tokens=12, seed=0)
    hard, report = no_think_filter(dataset, sampler, direct, progress=False)
    assert hard["answer"] == ["42", "42"] and report.flagged == 4


def test_pass_rate_columns_survive_a_round_trip(tmp_path, scripted_rows):
    dataset, _ = add_pass_rates(Dataset.from_list(scripted_rows), ScriptedSampler(SCRIPT), SamplingParams(n=4))
    path = tmp_path / "rates.jsonl"
    dataset.to_json(str(path), lines=True)
    back = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["pass_rate"] for r in back] == [0.0, 0.25, 1.0, 0.5, None]
