"""data_filters/question_type.py: planted multiple-choice, true/false, yes/no and proof questions in the real
amc and math_train sets are all found; real rows checked by hand are classified as a reader would."""

from __future__ import annotations

import json

import pytest
from datasets import Dataset

from data_filters.question_type import filter_question_types, question_types

PLANTED = [
    # (question, answer, the types it must get)
    ("What is $2+2$? (A) 3 (B) 4 (C) 5 (D) 6", "B", {"multiple_choice"}),
    ("Which of the following numbers is prime? $15$, $21$, $23$, $27$", "23", {"multiple_choice"}),
    (
        "Compute $x$.\n\n$\\textbf{(A) }1 \\qquad \\textbf{(B) }2 \\qquad \\textbf{(C) }3 \\qquad \\textbf{(D) }4$",
        "2",
        {"multiple_choice"},
    ),
    ("Find the area.\nA. 10\nB. 12\nC. 14\nD. 16", "12", {"multiple_choice"}),
    ("Pick the right value of $y$.\nA) $1$\nB) $2$\nC) $3$", "\\text{(C)}", {"multiple_choice"}),
    ("Choose the correct option for $3^2$: (1) 6 (2) 9 (3) 12 (4) 27", "9", {"multiple_choice"}),
    ("Which graph shows $y = x^2$? Enter the letter of the graph.", "\\text{D}", {"multiple_choice"}),
    ("True or false: every prime number is odd.", "\\text{False}", {"true_false"}),
    ("Is $1001$ divisible by $7$?", "True", {"true_false"}),
    ("Is $2^{31}-1$ prime? Answer yes or no.", "yes", {"yes_no"}),
    ("Can a triangle have two right angles?", "\\text{No}", {"yes_no"}),
    ("Prove that there are infinitely many primes.", None, {"proof", "unverifiable_answer"}),
    (
        "Let $n$ be an odd integer. Show that $n^2 - 1$ is divisible by $8$.",
        "\\text{proof}",
        {"proof", "unverifiable_answer"},
    ),
    ("Let $a, b > 0$ with $a + b = 1$, and prove that $ab \\le 1/4$.", "", {"proof", "unverifiable_answer"}),
    (
        "Describe all functions $f$ with $f(x+y) = f(x) + f(y)$.",
        "All additive functions, linear on the rationals",
        {"unverifiable_answer"},
    ),
]


@pytest.mark.parametrize("question, answer, expected", PLANTED)
def test_planted_questions(question, answer, expected):
    assert set(question_types(question, answer)) == expected


def load(shared_math_data, name: str) -> list[dict]:
    return [json.loads(line) for line in (shared_math_data / f"{name}.jsonl").read_text().splitlines()]


# Real rows read by hand. math_train: multiple choice in every dress (lettered lines, A) / A). / \textbf{(A)},
# lower-case (a)..(e) options answered with a letter, a letter code for conic sections, "which of the
# following" with the options inline), and free-text golds.
HAND_CHECKED = {
    "math_train": {
        265: {"multiple_choice"},  # "Which of the following points is farthest from the origin: ..."
        900: {"multiple_choice"},  # A. ... E. on their own lines, answer B
        2162: {"multiple_choice"},  # AMC options \textbf{(A) } 477 \qquad ..., answer the value 557
        3401: {"multiple_choice"},  # (a) .. (e) options, answer E
        3682: {"multiple_choice"},  # Enter "C" for circle, "P" for parabola ..., answer \text{(E)}
        4158: {"multiple_choice"},  # A). $x$ B). $x^2$ ...
        4329: {"multiple_choice"},  # A.\ \ ... B.\ \ ... inside \[ \]
        5434: {"multiple_choice"},  # \text A. \ \ 21 \qquad \text B. ...
        6356: {"multiple_choice"},  # A) 65.141 B) 65.138 ...
        6471: {"multiple_choice"},  # "On which quarter of the circle, A, B, C or D, did Joneal stop?", answer C
        3834: {"unverifiable_answer"},  # \text{two lines}
        6370: {"unverifiable_answer"},  # \text{Softball, Kickball, Picnic}
        # not flagged: Asymptote labels that look like options, a verb "show that", math golds with letters
        62: set(),  # label(sp(A,"A"),A,NW) ... in [asy]
        938: set(),
        6303: set(),  # "in what year will the census show that the number of wrens is less than 10%"
        3385: set(),  # gold -(ab + ac + bc)
        1335: set(),  # gold 5225 \text{ cubic inches}
        # a seeded random sample (random.Random(6).sample(range(7474), 20)), all plain computations
        **{i: set() for i in (3, 179, 301, 660, 1192, 2143, 2233, 2616, 3056, 3852, 3973, 4700, 4804, 5429, 6019)},
        **{i: set() for i in (6223, 6244, 6308, 6499, 6733)},
    },
    "math500": {227: {"multiple_choice"}, 255: {"multiple_choice"}, 296: {"multiple_choice"}},
    # AIME statements with conditions (a) (b) (c) or (1) (2) (3) are not options
    "aime_1983_2023": {152: set(), 322: set(), 646: set(), 659: set()},
}


@pytest.mark.parametrize("name", sorted(HAND_CHECKED))
def test_hand_checked_real_rows(shared_math_data, name):
    rows = load(shared_math_data, name)
    for index, expected in HAND_CHECKED[name].items():
        assert set(question_types(rows[index]["problem"], rows[index]["answer"])) == expected, (name, index)


def test_amc_has_no_flagged_question(shared_math_data):
    # amc.jsonl keeps the AMC problems whose answers are numbers, options removed: all 83 read by hand
    rows = load(shared_math_data, "amc")
    assert [i for i, row in enumerate(rows) if question_types(row["problem"], row["answer"])] == []


@pytest.mark.parametrize("name", ["amc", "math_train"])
def test_planted_rows_are_all_dropped_and_counted(shared_math_data, name):
    real = [
        {"problem": row["problem"], "answer": row["answer"], "id": f"real-{i}"}
        for i, row in enumerate(load(shared_math_data, name))
    ]
    baseline = [question_types(row["problem"], row["answer"]) for row in real]
    planted = [{"problem": q, "answer": a, "id": f"planted-{i}"} for i, (q, a, _) in enumerate(PLANTED)]
    mixed = list(real)
    for number, row in enumerate(planted):  # spread through the real rows
        mixed.insert((number + 1) * len(real) // (len(planted) + 1) + number, row)
    dataset = Dataset.from_list(mixed)
    kept, report = filter_question_types(dataset)
    assert not any(row_id.startswith("planted") for row_id in kept["id"])
    expected_flagged = sum(bool(types) for types in baseline) + len(planted)
    assert report.flagged == expected_flagged and report.dropped == expected_flagged
    found = report.details["types found (dropped or not)"]
    for type_name in ("multiple_choice", "true_false", "yes_no", "proof"):
        planted_count = sum(type_name in types for _, _, types in PLANTED)
        assert found[type_name] == planted_count + sum(type_name in types for types in baseline)

    tagged, report = filter_question_types(dataset, drop_types=["proof"], mode="tag")
    assert len(tagged) == len(dataset) and report.flagged == sum("proof" in types for _, _, types in PLANTED)
    by_id = dict(zip(tagged["id"], tagged["question_types"], strict=True))
    assert all(set(by_id[f"planted-{i}"]) == types for i, (_, _, types) in enumerate(PLANTED))


def test_tag_mode_types_its_column_even_when_nothing_is_found():
    from datasets import List, Value

    rows = Dataset.from_list([{"problem": f"What is {i}+1?", "answer": str(i + 1)} for i in range(3)])
    tagged, report = filter_question_types(rows, mode="tag")
    assert tagged["question_types"] == [[], [], []] and report.flagged == 0
    assert tagged.features["question_types"] == List(Value("string"))


def test_unknown_types_are_rejected():
    with pytest.raises(ValueError, match="unknown type"):
        filter_question_types(Dataset.from_list([{"problem": "x", "answer": "1"}]), drop_types=["essay"])
