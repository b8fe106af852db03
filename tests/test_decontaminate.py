"""data_filters/decontaminate.py: find_overlaps against a brute force on random inputs, planted copies of
AIME 2024 and MATH-500 problems in the real training pools (aime_1983_2023, math_train) all caught, short
shared phrases not caught, the genuine overlaps counted, and the tag/drop step with its match report."""

from __future__ import annotations

import json
import random

import pytest
from datasets import Dataset

from data_filters.decontaminate import decontaminate, find_overlap_matches, find_overlaps
from tasks.schema import DataArguments, load_rows


def ngram_sets(text: str, size: int) -> set[tuple[str, ...]]:
    words = text.lower().split()
    return {tuple(words[i : i + size]) for i in range(len(words) - size + 1)}


def brute_force(train: list[str], evals: list[str], n: int) -> dict[tuple[int, int], float]:
    """(train, eval) -> coverage, by comparing every pair's n-gram sets (an eval text under n words: as a whole)."""
    sizes = {min(n, len(text.split())) for text in evals} - {0}
    train_sets = {size: [ngram_sets(text, size) for text in train] for size in sizes}
    found = {}
    for j, eval_text in enumerate(evals):
        size = min(n, len(eval_text.split()))
        if size == 0:
            continue
        eval_grams = ngram_sets(eval_text, size)
        for i, train_grams in enumerate(train_sets[size]):
            if not eval_grams.isdisjoint(train_grams):
                found[(i, j)] = len(eval_grams & train_grams) / len(eval_grams)
    return found


def test_find_overlaps_equals_brute_force_on_random_texts():
    rng = random.Random(0)
    for trial in range(300):
        vocabulary = [f"w{k}" for k in range(rng.randint(2, 6))]

        def text(vocabulary=vocabulary):
            words = [rng.choice(vocabulary) for _ in range(rng.randint(0, 14))]
            return (" " * rng.randint(1, 3)).join(w.upper() if rng.random() < 0.2 else w for w in words)

        train = [text() for _ in range(rng.randint(0, 9))]
        evals = [text() for _ in range(rng.randint(0, 7))]
        n = rng.randint(1, 6)
        expected = brute_force(train, evals, n)
        assert find_overlaps(train, evals, n) == sorted(expected), (trial, n, train, evals)
        for match in find_overlap_matches(train, evals, n):
            assert match.coverage == pytest.approx(expected[(match.train_index, match.eval_index)])
            # the reported n-gram really is in both texts
            size = len(match.ngram.split())
            assert tuple(match.ngram.split()) in ngram_sets(train[match.train_index], size)
            assert tuple(match.ngram.split()) in ngram_sets(evals[match.eval_index], size)


def test_chunked_confirmation_gives_the_same_matches(monkeypatch):
    """Hits are confirmed in chunks cut at training-row boundaries (to bound memory): tiny chunks, same answer."""
    rng = random.Random(5)
    vocabulary = [f"w{k}" for k in range(4)]
    train = [" ".join(rng.choice(vocabulary) for _ in range(rng.randint(0, 30))) for _ in range(40)]
    evals = [" ".join(rng.choice(vocabulary) for _ in range(rng.randint(1, 12))) for _ in range(15)]
    whole = find_overlap_matches(train, evals, n=3)
    monkeypatch.setattr("data_filters.decontaminate._CHUNK_ENTRIES", 7)
    assert find_overlap_matches(train, evals, n=3) == whole
    assert {(m.train_index, m.eval_index) for m in whole} == set(brute_force(train, evals, 3))


def test_short_phrases_are_not_matches_and_whole_short_problems_are():
    evals = ["Let x be a real number such that x^2 = 4. Find the largest possible x.", "Simplify $\\sqrt{242}$."]
    train = [
        "let x be a real number such",  # 7 words: shorter than n
        "Let x be a real number such that x^2 = 9 for all",  # 8 shared words in a row: a match
        "Please simplify $\\sqrt{242}$. now",  # the whole short problem inside
        "simplify $\\sqrt{243}$.",
    ]
    assert find_overlaps(train, evals, n=8) == [(1, 0), (2, 1)]


def perturbed_copy(text: str, rng: random.Random) -> str:
    """Re-cased, re-spaced (doubled spaces, newlines, tabs), behind a prefix: the same words to the filter."""
    words = text.split()
    cased = [w.upper() if rng.random() < 0.5 else w.lower() for w in words]
    spaced = "".join(word + rng.choice(["  ", "\n", " \t ", "   "]) for word in cased)
    return f"Problem {rng.randint(1, 99)} (from an old contest): " + spaced


@pytest.fixture(scope="module")
def pools(shared_math_data):
    def questions(name):
        return [json.loads(line)["problem"] for line in (shared_math_data / f"{name}.jsonl").read_text().splitlines()]

    return {name: questions(name) for name in ("aime_1983_2023", "math_train", "aime24", "math500")}


def test_planted_copies_are_all_caught_and_genuine_overlaps_counted(pools):
    rng = random.Random(1)
    train = pools["aime_1983_2023"] + pools["math_train"]
    planted = {}  # train index -> (eval set, eval index)
    for name in ("aime24", "math500"):
        for index, text in enumerate(pools[name]):
            planted[len(train)] = (name, index)
            train.append(perturbed_copy(text, rng))
    # rows that share only short common phrases (7 words) with an eval problem
    short = []
    for text in pools["aime24"][:10] + pools["math500"][::50]:
        words = text.split()
        if len(words) >= 7:
            short.append(len(train))
            train.append("Here is a new problem: " + " ".join(words[:7]) + " and nothing else follows.")
    results = {}
    for name in ("aime24", "math500"):
        matches = find_overlap_matches(train, pools[name], n=8)
        pairs = {(m.train_index, m.eval_index): m for m in matches}
        for train_index, (eval_name, eval_index) in planted.items():
            if eval_name == name:
                assert (train_index, eval_index) in pairs, f"planted copy of {name}[{eval_index}] missed"
                assert pairs[(train_index, eval_index)].coverage == 1.0
        assert not any(m.train_index in short for m in matches)
        # genuine overlaps of the real pools, checked against the brute force
        real = [m for m in matches if m.train_index < len(pools["aime_1983_2023"]) + len(pools["math_train"])]
        expected = brute_force(pools["aime_1983_2023"] + pools["math_train"], pools[name], 8)
        assert {(m.train_index, m.eval_index) for m in real} == set(expected)
        results[name] = {
            "pairs": len(real),
            "rows": len({m.train_index for m in real}),
            "rows coverage >= 0.5": len({m.train_index for m in real if m.coverage >= 0.5}),
            "rows coverage 1.0": len({m.train_index for m in real if m.coverage == 1.0}),
        }
    print("genuine overlaps of aime_1983_2023 + math_train (8-grams):", results)
    # MATH-500 holds AIME problems, copied word for word: the 2 pools overlap it for real
    assert results["math500"]["rows coverage 1.0"] >= 3


def test_the_step_tags_or_drops_and_writes_every_match(shared_math_data, tmp_path):
    rows = load_rows(DataArguments(dataset_name=str(shared_math_data / "aime_1983_2023.jsonl")))
    copy = perturbed_copy(
        json.loads((shared_math_data / "aime24.jsonl").read_text().splitlines()[4])["problem"], random.Random(2)
    )
    pool = Dataset.from_list(
        [{"problem": copy, "answer": "1", "id": "planted"}] + rows.select_columns(["problem", "answer", "id"]).to_list()
    )
    eval_sets = [str(shared_math_data / "aime24.jsonl"), str(shared_math_data / "math500.jsonl")]
    report_path = tmp_path / "matches.jsonl"
    strict, report = decontaminate(pool, eval_sets, n=8, min_coverage=0.5, report_path=report_path, progress=False)
    matches = [json.loads(line) for line in report_path.read_text().splitlines()]
    assert "planted" not in strict["id"] and report.dropped == len({m["train_index"] for m in matches})
    planted = [m for m in matches if m["train_id"] == "planted"]
    assert len(planted) == 1 and planted[0]["eval_index"] == 4 and planted[0]["coverage"] == 1.0
    assert all(m["ngram"] and len(m["ngram"].split()) <= 8 for m in matches)
    assert report.reasons[f"overlaps {eval_sets[0]}"] == 1

    tagged, report = decontaminate(pool, eval_sets, n=8, mode="tag", progress=False)
    assert len(tagged) == len(pool) and tagged["contaminated"][0] and tagged["contaminated_by"][0] == eval_sets[0]
    # any shared 8-gram flags far more rows than min_coverage 0.5 (AIME boilerplate)
    assert (
        report.flagged
        == sum(tagged["contaminated"])
        > strict.num_rows * 0 + report.details[eval_sets[0]]["rows_flagged"] - 1
    )
    assert report.details[eval_sets[0]]["rows_any_shared_ngram"] > 100


def test_eval_sets_by_registry_name(monkeypatch):
    """Registry names go through tasks.datasets (the Hub is stubbed: no machine here reaches it)."""
    problem = "Find the number of ordered pairs of integers (a, b) such that a + b = 2024 and both are positive."

    def fake_load_dataset(path, config=None, split=None, **kwargs):
        assert path == "HuggingFaceH4/aime_2024"
        return Dataset.from_list([{"problem": problem, "answer": "2023"}])

    monkeypatch.setattr("datasets.load_dataset", fake_load_dataset)
    pool = Dataset.from_list([{"problem": "Old: " + problem.upper(), "answer": "1"}, {"problem": "x", "answer": "2"}])
    kept, report = decontaminate(pool, ["aime24"], progress=False)
    assert kept["problem"] == ["x"] and report.reasons == {"overlaps aime24": 1}
