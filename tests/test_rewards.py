"""The reward library against values worked out by hand, and the registry."""

from __future__ import annotations

import math

import pytest

from rewards import available_rewards, build_rewards, get_reward
from rewards.registry import UnknownRewardError


def ids(*lengths):
    return [[0] * n for n in lengths]


# ---------------------------------------------------------------- overlong (DAPO)


def test_overlong_boundaries():
    overlong = get_reward("overlong", max_len=20, buffer=5)  # punishment starts after 15 tokens
    lengths = [0, 15, 16, 18, 20, 21, 100]
    assert overlong(["x"] * 7, completion_ids=ids(*lengths)) == pytest.approx([0.0, 0.0, -0.2, -0.6, -1.0, -1.0, -1.0])


def test_overlong_rejects_a_buffer_longer_than_the_limit():
    with pytest.raises(ValueError, match="buffer"):
        get_reward("overlong", max_len=10, buffer=11)


def test_overlong_without_token_ids_counts_characters():
    overlong = get_reward("overlong", max_len=10, buffer=4)
    assert overlong(["abcdefgh"]) == [pytest.approx(-0.5)]


# ---------------------------------------------------------------- Kimi length


def test_length_penalty_is_linear_in_tokens_past_the_free_ones():
    penalty = get_reward("length_penalty")
    assert penalty(["x", "y", "z"], completion_ids=[[1] * 7, [], [1] * 40]) == [-7.0, 0.0, -40.0]
    free = get_reward("length_penalty", free_tokens=10)
    assert free(["x", "y"], completion_ids=[[1] * 7, [1] * 25]) == [0.0, -15.0]
    assert penalty(["abcd"]) == [-4.0]  # without token ids: characters, said once in the log
    with pytest.raises(ValueError, match="free_tokens >= 0"):
        get_reward("length_penalty", free_tokens=-1)


def test_kimi_length_by_hand():
    kimi = get_reward("kimi_length")
    completions = ["\\boxed{1}", "\\boxed{1}", "\\boxed{2}", "\\boxed{2}", "\\boxed{1}"]
    scores = kimi(
        completions,
        answer=["1"] * 5,
        id=["a", "a", "a", "b", "b"],
        completion_ids=ids(10, 20, 30, 10, 30),
    )
    # group a: min 10, max 30 -> lambda 0.5, 0.0, -0.5; correct, correct, wrong -> 0.5, 0.0, min(0, -0.5)
    # group b: lambda 0.5, -0.5; wrong -> min(0, 0.5) = 0, correct -> -0.5
    assert scores == pytest.approx([0.5, 0.0, -0.5, 0.0, -0.5])


def test_kimi_length_equal_lengths_and_single_completions_give_zero():
    kimi = get_reward("kimi_length")
    assert kimi(["\\boxed{1}", "\\boxed{2}"], answer=["1", "1"], id=["a", "a"], completion_ids=ids(5, 5)) == [0.0, 0.0]
    assert kimi(["\\boxed{1}"], answer=["1"], id=["a"], completion_ids=ids(7)) == [0.0]


def test_kimi_length_groups_by_prompt_without_ids_and_skips_unscorable_rows():
    kimi = get_reward("kimi_length")
    scores = kimi(
        ["\\boxed{1}", "\\boxed{1}", "\\boxed{1}"],
        answer=["1", "1", ""],
        prompts=["p", "p", "q"],
        completion_ids=ids(10, 20, 5),
    )
    assert scores == [0.5, -0.5, None]


# ---------------------------------------------------------------- cosine


def test_cosine_by_hand():
    cosine = get_reward("cosine", max_len=100)
    completions = ["\\boxed{1}"] * 3 + ["\\boxed{2}"] * 3 + ["\\boxed{1}"]
    scores = cosine(completions, answer=["1"] * 7, completion_ids=ids(0, 50, 100, 0, 50, 100, 101))
    assert scores == pytest.approx([1.0, 0.75, 0.5, -1.0, -0.75, -0.5, -1.0])


def test_cosine_curve_is_monotone_between_its_ends():
    cosine = get_reward("cosine", max_len=1000, correct_short=2.0, correct_long=1.0)
    lengths = list(range(0, 1001, 50))
    scores = cosine(["\\boxed{1}"] * len(lengths), answer=["1"] * len(lengths), completion_ids=ids(*lengths))
    assert scores[0] == pytest.approx(2.0) and scores[-1] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(scores, scores[1:], strict=False))
    middle = 1.0 + 0.5 * (1 + math.cos(math.pi * 0.5))
    assert scores[10] == pytest.approx(middle)


# ---------------------------------------------------------------- repetition and language


def test_repetition_by_hand():
    repetition = get_reward("repetition", ngram_size=3, max_penalty=-1.0)
    # 6 words -> 4 trigrams (abc, bca, cab, abc), one a repeat -> 1/4
    assert repetition(["a b c a b c", "a b", "one two three four"]) == pytest.approx([-0.25, 0.0, 0.0])
    assert repetition(["loop " * 200])[0] < -0.95


def test_language_consistency_by_hand():
    english = get_reward("language_consistency", language="en")
    chinese = get_reward("language_consistency", language="zh")
    assert english(["hello world 你好"]) == [0.5]
    assert chinese(["hello world 你好"]) == [0.5]
    assert english(["Bonjour 123 x+y"]) == [1.0]
    assert english(["<think>hello 世界</think>答案是"]) == [pytest.approx(1 / 3)]  # only the reasoning counts
    assert english([""]) == [0.0]
    with pytest.raises(ValueError, match="unknown language"):
        get_reward("language_consistency", language="tlh")


# ---------------------------------------------------------------- format


@pytest.mark.parametrize(
    "completion, params, expected",
    [
        ("<think>\nreason\n</think>\n\\boxed{1}", {}, 1.0),
        ("reason\n</think>\n\\boxed{1}", {}, 1.0),  # the template pre-filled <think>
        ("reason\n</think>\n\\boxed{1}", {"think_prefilled": True}, 1.0),
        ("reason\n</think>\n\\boxed{1}", {"think_prefilled": False}, 0.0),
        ("<think>\nreason\n</think>\n\\boxed{1}", {"think_prefilled": True}, 0.0),  # repeats the pre-filled tag
        ("<think>reason</think>\\boxed{1}", {}, 1.0),
        ("<think>reason</think>\\boxed{1}", {"strict": True}, 0.0),
        ("reason\n</think>\n\\boxed{1}", {"strict": True}, 1.0),
        ("<think>reason</think>", {}, 0.0),
        ("<think>reason</think> 42", {}, 0.0),
        ("<think>reason</think> 42", {"require_boxed": False}, 1.0),
        ("<think></think>\\boxed{1}", {}, 0.0),
        ("<think>a</think>b</think>\\boxed{1}", {}, 0.0),
        ("\\boxed{1}", {}, 0.0),
    ],
)
def test_think_format(completion, params, expected):
    assert get_reward("think_format", **params)([completion]) == [expected]


def test_think_format_reads_prefill_from_text_prompts():
    think_format = get_reward("think_format")
    completion = "<think>\nreason\n</think>\n\\boxed{1}"
    assert think_format([completion, completion], prompts=["Q<|assistant|><think>\n", "Q<|assistant|>"]) == [0.0, 1.0]


def test_tag_count_partial_credit():
    tag_count = get_reward("tag_count")
    scores = tag_count(["<think>a</think>b", "a</think>b", "a</think>", "<think>a", "", "<think><think>a</think>b"])
    assert scores == pytest.approx([1.0, 1.0, 2 / 3, 1 / 3, 0.0, 2 / 3])


# ---------------------------------------------------------------- controls


def test_random_reward_is_deterministic_and_has_the_asked_rate():
    rand = get_reward("random", p=0.3, seed=1)
    completions = [f"completion {i}" for i in range(4000)]
    row_ids = [f"row{i % 50}" for i in range(4000)]
    first = rand(completions, id=row_ids)
    assert first == rand(completions, id=row_ids)
    assert set(first) <= {0.0, 1.0}
    assert abs(sum(first) / len(first) - 0.3) < 0.03  # 4.1 standard deviations of a binomial mean
    assert first != get_reward("random", p=0.3, seed=2)(completions, id=row_ids)
    assert get_reward("random", p=0.0)(completions[:10]) == [0.0] * 10
    assert get_reward("random", p=1.0)(completions[:10]) == [1.0] * 10


def test_random_reward_is_a_fair_coin_fixed_by_seed_prompt_and_completion():
    """The random-reward control of the sample-efficiency bench: default p is 0.5, rows without an id are
    keyed by their prompt, and the same (seed, prompt, completion) always draws the same value."""
    rand = get_reward("random", seed=3)
    completions = [f"<think>\\nx={i}\\n</think>\\n\\boxed{{{i % 7}}}" for i in range(6000)]
    prompts = [f"problem {i % 300}" for i in range(6000)]
    scores = rand(completions, prompts=prompts)
    assert set(scores) == {0.0, 1.0}
    assert abs(sum(scores) / len(scores) - 0.5) < 0.026  # 4 standard deviations of a binomial mean
    assert scores == get_reward("random", seed=3)(list(reversed(completions)), prompts=list(reversed(prompts)))[::-1]
    # the prompt is part of the key: one completion under many prompts is not one draw repeated
    same = rand(["\\boxed{1}"] * 400, prompts=[f"p{i}" for i in range(400)])
    assert 0.4 < sum(same) / 400 < 0.6
    assert get_reward("random", seed=4)(completions, prompts=prompts) != scores


FORMAT_CASES = [
    ("<think>\na=7\n</think>\n\\boxed{7}", 1.0),
    ("<think>\na=7\n</think>\n\\boxed{8}", 1.0),  # wrong, and readable
    ("\\boxed{7}", 1.0),  # no think tags: the whole text is the answer segment
    ("<think>\na=7\n</think>\n\\boxed{7} so \\boxed{7}", 1.0),  # the same value twice
    ("<think>\na=7\n</think>\n\\boxed{x^2+1}", 1.0),
    ("<think>\na=7\n</think>\n\\boxed{7} or \\boxed{8}", 0.0),  # two values stated together
    ("<think>\na=7\n</think>\n\\boxed{3 or 4}", 0.0),  # alternatives in one box
    ("<think>\na=7\nb=\\boxed{7}", 0.0),  # reasoning never closed
    ("<think>\na=7\n</think>\nthe answer is 7", 0.0),  # no box
    ("<think>\na=7\n</think>\n\\boxed{}", 0.0),  # empty box
    ("\\boxed{\uff14\uff12}", 0.0),  # look-alike digits
    ("\\boxed{" + "1" * 1001 + "}", 0.0),  # longer than any real answer
    ("", 0.0),
]


def test_format_only_reward_against_hand_cases():
    texts, expected = zip(*FORMAT_CASES, strict=True)
    format_only = get_reward("format_only")
    assert format_only(list(texts)) == list(expected)
    chat = [[{"role": "assistant", "content": text}] for text in texts]
    assert format_only(chat) == list(expected)
    assert format_only([None, 42]) == [0.0, 0.0]  # unreadable completions score, never raise


def test_format_only_reward_cannot_tell_right_from_wrong():
    texts = [f"<think>\nb={value}\n</think>\n\\boxed{{{value}}}" for value in range(10)]
    golds = ["3"] * 10
    accuracy = get_reward("math_accuracy")(texts, golds)
    assert accuracy == [float(value == 3) for value in range(10)]  # the verifier tells them apart
    format_only = get_reward("format_only")
    assert format_only(texts, answer=golds) == [1.0] * 10
    assert format_only(texts, answer=["4"] * 10) == format_only(texts) == [1.0] * 10


def test_constant():
    assert get_reward("constant", value=0.5)(["a", "b"]) == [0.5, 0.5]


# ---------------------------------------------------------------- registry


def test_registry_lists_the_library():
    expected = {"math_accuracy", "think_format", "tag_count", "overlong", "kimi_length", "cosine", "repetition"}
    assert expected | {"language_consistency", "random", "constant", "format_only"} <= set(available_rewards())


def test_unknown_names_and_parameters_list_what_exists():
    with pytest.raises(UnknownRewardError, match="available: .*math_accuracy"):
        get_reward("math_acuracy")
    with pytest.raises(UnknownRewardError, match="its parameters: max_len=4096, buffer=1024"):
        get_reward("overlong", max_length=10)


def test_build_rewards_from_yaml_entries():
    functions, weights = build_rewards(
        [
            {"name": "math_accuracy", "weight": 1.0},
            {"name": "overlong", "weight": 0.5, "max_len": 8, "buffer": 4},
            "tag_count",
        ]
    )
    assert [function.__name__ for function in functions] == ["math_accuracy", "overlong", "tag_count"]
    assert weights == [1.0, 0.5, 1.0]
    assert functions[1](["x"], completion_ids=ids(6)) == [-0.5]
    with pytest.raises(UnknownRewardError, match="rewards\\[0\\]"):
        build_rewards([{"weight": 1.0}])


def test_every_reward_takes_the_arguments_trl_passes():
    """TRL calls fn(prompts=..., completions=..., completion_ids=..., **columns, trainer_state=..., ...)."""
    batch = {
        "prompts": [[{"role": "user", "content": "a=1. Find a."}]] * 2,
        "completions": [[{"role": "assistant", "content": "<think>\na=1\n</think>\n\\boxed{1}"}]] * 2,
        "completion_ids": ids(12, 12),
        "answer": ["1", "1"],
        "id": ["r1", "r1"],
        "trainer_state": None,
        "log_extra": lambda *args: None,
        "log_metric": lambda *args: None,
    }
    for name in available_rewards():
        if name.startswith("code") or name in ("reward_model", "llm_judge"):
            continue  # a `tests` column / a model path: covered by the code reward's and the learned rewards' tests
        scores = get_reward(name)(**batch)
        assert len(scores) == 2 and all(score is None or isinstance(score, float) for score in scores), name
