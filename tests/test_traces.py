"""recipes/common/traces/: the keep rule of rejection sampling and distillation (verified, distinct, at most m
per problem, shortest first or seeded random) and STaR's hint, checked against hand-computed expectations."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from eval.sampler import Sample
from recipes.common.traces import TraceArguments, add_answer_hint, collect_traces, mentions_hint, select_samples


def sample(text: str, correct: bool | None = True, tokens: int | None = None, finish: str = "stop") -> dict:
    return {
        "text": text,
        "correct": correct,
        "num_tokens": len(text) if tokens is None else tokens,
        "finish_reason": finish,
    }


SAMPLES = [
    sample("long correct \\boxed{7}", tokens=9),  # 0
    sample("wrong \\boxed{3}", correct=False, tokens=2),  # 1: wrong
    sample("Short \\boxed{7}", tokens=4),  # 2
    sample("short   \\boxed{7}", tokens=5),  # 3: a duplicate of 2 after normalisation (case, spaces)
    sample("cut off \\boxed{7}", tokens=1, finish="length"),  # 4: did not stop
    sample("mid \\boxed{7}", tokens=6),  # 5
    sample("unscorable", correct=None, tokens=1),  # 6: the verifier could not score it
    sample("tie a \\boxed{7}", tokens=4),  # 7: same token count as 2, more characters
]


def texts(chosen):
    return [s["text"] for s in chosen]


def test_shortest_first_keeps_verified_distinct_stopped_samples_in_token_order():
    # eligible: 0 (9 tokens), 2 (4), 5 (6), 7 (4); 3 duplicates 2, 1 is wrong, 4 was cut, 6 unscorable
    assert texts(select_samples(SAMPLES, 2, "shortest")) == ["Short \\boxed{7}", "tie a \\boxed{7}"]  # 4, 4 tokens
    assert texts(select_samples(SAMPLES, 3, "shortest")) == ["Short \\boxed{7}", "mid \\boxed{7}", "tie a \\boxed{7}"]
    assert len(select_samples(SAMPLES, 10, "shortest")) == 4  # at most m, and never more than the eligible


def test_duplicates_keep_the_first_occurrence():
    chosen = select_samples(SAMPLES, 10, "shortest")
    assert "Short \\boxed{7}" in texts(chosen) and "short   \\boxed{7}" not in texts(chosen)


def test_cut_samples_are_kept_only_when_asked():
    assert "cut off \\boxed{7}" in texts(select_samples(SAMPLES, 10, "shortest", require_stop=False))
    assert texts(select_samples(SAMPLES, 1, "shortest", require_stop=False)) == ["cut off \\boxed{7}"]  # 1 token


def test_unverified_mode_keeps_wrong_and_unscorable_samples_but_still_deduplicates():
    chosen = texts(select_samples(SAMPLES, 10, "shortest", require_correct=False))
    assert chosen == [s["text"] for i, s in enumerate(SAMPLES) if i not in (3, 4)]


def test_random_selection_is_a_seeded_subset_per_problem():
    eligible = ["long correct \\boxed{7}", "Short \\boxed{7}", "mid \\boxed{7}", "tie a \\boxed{7}"]
    chosen = texts(select_samples(SAMPLES, 2, "random", seed=5, problem_id="p1"))
    # the rule: random.Random(f"{seed}:{problem id}").sample over the eligible list, returned in sampling order
    picked = random.Random("5:p1").sample(list(enumerate(eligible)), 2)
    assert chosen == [text for _, text in sorted(picked)]
    assert chosen == texts(select_samples(SAMPLES, 2, "random", seed=5, problem_id="p1"))  # reproducible
    draws = {tuple(texts(select_samples(SAMPLES, 2, "random", seed=s, problem_id="p1"))) for s in range(30)}
    assert len(draws) > 3  # the seed matters: not always the same two
    assert all(set(draw) <= set(eligible) and len(draw) == 2 for draw in draws)


def test_bad_options_are_named():
    with pytest.raises(ValueError, match="max_per_problem"):
        select_samples(SAMPLES, 0)
    with pytest.raises(ValueError, match="selection"):
        select_samples(SAMPLES, 1, "longest")
    with pytest.raises(ValueError, match="selection"):
        TraceArguments(selection="best")
    with pytest.raises(ValueError, match="sampling: n must be >= 1"):
        TraceArguments(sampling={"n": 0})
    with pytest.raises(ValueError, match="sampling: backend must be one of"):
        TraceArguments(sampling={"backend": "tgi"})
    with pytest.raises(ValueError, match="unknown sampling option.*'max_new_token'.*did you mean 'max_new_tokens'"):
        TraceArguments(sampling={"max_new_token": 16})


def test_untrusted_completions_never_crash_the_keep_rule():
    odd = [{"text": None, "correct": True, "finish_reason": "stop"}, {"correct": True}, sample("", tokens=0)]
    assert select_samples(odd, 3, "shortest") == []


# ---------------------------------------------------------------- STaR


REPO = Path(__file__).resolve().parents[1]
PROMPT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "a=4 b=a. Find b."}]


def test_answer_hint_goes_to_the_last_user_message_of_a_copy():
    hinted = add_answer_hint(PROMPT, "4")
    assert hinted[1]["content"] == "a=4 b=a. Find b.\n\nHint: the answer is 4."
    assert hinted[0] == PROMPT[0]
    assert PROMPT[1]["content"] == "a=4 b=a. Find b."  # the original is untouched
    assert add_answer_hint(PROMPT, "\\frac{1}{2}", " [{answer}]")[1]["content"].endswith(" [\\frac{1}{2}]")
    with pytest.raises(ValueError, match="answer"):
        add_answer_hint(PROMPT, "4", "no placeholder")


def test_a_rationale_that_quotes_the_hint_is_recognised():
    assert mentions_hint("as the hint says, the answer is 4. \\boxed{4}", "4") is False  # not the hint's words
    assert mentions_hint("Hint:  the answer is 4.\n\\boxed{4}", "4") is True
    assert mentions_hint("<think>b=a\na=4</think>\\boxed{4}", "4") is False


class HintOnlySampler:
    """A scripted sampler: it answers correctly only when the prompt carries the hint, and records its prompts."""

    def __init__(self):
        self.prompts = []

    def generate(self, prompts, params, keys=None):
        self.prompts += prompts
        out = []
        for prompt in prompts:
            content = prompt[-1]["content"]
            if "Hint: the answer is" in content:
                answer = content.rsplit(" ", 1)[-1].rstrip(".")
                texts = [
                    f"<think>\nb=a\na={answer}\n</think>\n\\boxed{{{answer}}}",
                    f"Hint: the answer is {answer}. \\boxed{{{answer}}}",
                ]
            else:
                texts = ["\\boxed{0}", "no idea"]
            out.append([Sample(texts[i % 2], 5, "stop") for i in range(params.n)])
        return out


def test_rationalisation_keeps_verified_rationales_with_the_original_prompt():
    rows = [{"id": "q1", "prompt": PROMPT, "answer": "4", "verifier": "math", "difficulty": 2}]
    args = TraceArguments(sampling={"n": 4}, max_per_problem=4)
    sampler = HintOnlySampler()
    kept, results = collect_traces(sampler, rows, args, seed=0, progress=False)
    assert kept == [] and results[0].num_correct == 0  # unsolved without the hint

    kept, results = collect_traces(
        sampler, rows, args, seed=0, hint_template="\n\nHint: the answer is {answer}.", progress=False
    )
    assert "Hint: the answer is 4." in sampler.prompts[-1][-1]["content"]  # the model saw the hint
    assert results[0].num_correct == 4  # both texts are verified correct ...
    assert len(kept) == 1  # ... but the one that quotes the hint is dropped, and duplicates are one
    assert kept[0]["prompt"] == PROMPT  # stored without the hint
    assert kept[0]["solution"].endswith("\\boxed{4}") and kept[0]["rationalized"] is True


# ---------------------------------------------------------------- a reward model in the keep rule


def scored(text: str, score: float | None, correct: bool | None = True) -> dict:
    return {**sample(text, correct=correct), "reward_score": score}


def test_min_score_and_best_selection_read_the_reward_model_scores():
    samples = [scored("a \\boxed{1}", 0.2), scored("b \\boxed{1}", 0.9), scored("c \\boxed{1}", None),
               scored("d \\boxed{2}", 0.95, correct=False), scored("e \\boxed{1}", 0.5)]  # fmt: skip
    assert texts(select_samples(samples, 2, "best")) == ["b \\boxed{1}", "e \\boxed{1}"]  # verified, highest first
    assert texts(select_samples(samples, 5, "random", min_score=0.4)) == ["b \\boxed{1}", "e \\boxed{1}"]
    # the reward model alone (no verifier): the wrong one scores highest and is kept; unscored never is
    unverified = select_samples(samples, 1, "best", require_correct=False)
    assert texts(unverified) == ["d \\boxed{2}"]


def test_keep_options_that_need_a_reward_model_say_so():
    for options in ({"keep_by": "reward_model"}, {"selection": "best"}, {"keep_min_score": 0.5}):
        with pytest.raises(ValueError, match="keep_reward_model"):
            TraceArguments(**options)
    with pytest.raises(ValueError, match="keep_by must be one of"):
        TraceArguments(keep_by="judge", keep_reward_model={"path": "x"})
    with pytest.raises(ValueError, match="combine"):  # the reward's own options are checked as the config is read
        TraceArguments(keep_reward_model={"path": "x", "combine": "max"})


class LineSampler:
    """A scripted sampler with a real tokenizer: for every prompt, completions of 3, 1 and 2 lookup lines (all
    with the right answer, so the verifier keeps each)."""

    TEXTS = ["<think>\na=b\nb=c\nc=4\n</think>\n\\boxed{4}", "<think>\nc=4\n</think>\n\\boxed{4}",
             "<think>\nb=c\nc=4\n</think>\n\\boxed{4}"]  # fmt: skip

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def generate(self, prompts, params, keys=None):
        return [[Sample(self.TEXTS[i % 3], 5, "stop") for i in range(params.n)] for _ in prompts]


def test_a_reward_model_picks_what_rejection_sampling_keeps(tmp_path):
    """The planted reward model (tests/support: the fewer line breaks, the higher) ranks the three completions;
    `best` keeps its favourite, as a direct forward pass of the same model ranks them."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from tests.support.planted_reward_model import build_planted_reward_model

    cold_start = REPO / "recipes" / "assets" / "tiny-cold-start"
    planted = build_planted_reward_model(tmp_path / "rm", cold_start)
    tokenizer = AutoTokenizer.from_pretrained(cold_start)
    rows = [{"id": "q1", "prompt": PROMPT, "answer": "4", "verifier": "math", "difficulty": 2}]
    args = TraceArguments(
        sampling={"n": 3}, max_per_problem=1, selection="best", keep_reward_model={"path": str(planted)}
    )
    kept, results = collect_traces(LineSampler(tokenizer), rows, args, seed=0, progress=False)

    model = AutoModelForSequenceClassification.from_pretrained(planted).eval()
    direct = []
    for text in LineSampler.TEXTS:
        chat = tokenizer.apply_chat_template([*PROMPT, {"role": "assistant", "content": text}], tokenize=False)
        with torch.no_grad():
            direct.append(model(**tokenizer(chat, return_tensors="pt", add_special_tokens=False)).logits[0, 0].item())
    assert [s["reward_score"] for s in results[0].samples] == pytest.approx(direct, abs=1e-4)
    assert [row["solution"] for row in kept] == [LineSampler.TEXTS[direct.index(max(direct))]]
    assert kept[0]["reward_score"] == pytest.approx(max(direct), abs=1e-4)

    # keep_by reward_model with a floor between the scores: the two best stay, without asking the verifier
    floor = sorted(direct)[0] + 1e-3
    args = TraceArguments(sampling={"n": 3}, max_per_problem=3, keep_by="reward_model", keep_min_score=floor,
                          keep_reward_model={"path": str(planted)})  # fmt: skip
    kept, _ = collect_traces(LineSampler(tokenizer), rows, args, seed=0, progress=False)
    assert len(kept) == 2 and LineSampler.TEXTS[direct.index(min(direct))] not in [row["solution"] for row in kept]
