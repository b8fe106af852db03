"""Sample completions for schema rows and score each one with the row's verifier.

The one place where "generate, then ask the verifier" happens, so that evaluation, the pass-rate filter
and rejection sampling count a problem as solved by the same rule.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import asdict, dataclass, field

from eval.metrics import pass_at_k
from eval.sampler import SamplingParams

logger = logging.getLogger(__name__)


@dataclass
class ProblemResult:
    """All samples of one problem with their verdicts."""

    id: str
    answer: str | None
    difficulty: int | None
    samples: list[dict] = field(default_factory=list)  # text, extracted, correct, reason, num_tokens, finish_reason

    @property
    def n(self) -> int:
        return len(self.samples)

    @property
    def num_correct(self) -> int:
        return sum(1 for sample in self.samples if sample["correct"])

    def pass_at(self, k: int) -> float:
        return pass_at_k(self.n, self.num_correct, k)

    def to_dict(self) -> dict:
        return {**asdict(self), "n": self.n, "num_correct": self.num_correct}


@dataclass(frozen=True)
class Score:
    """One completion's verdict in the terms every consumer needs, whatever the verifier."""

    correct: bool | None  # None: the row cannot be scored (unreadable gold, missing tests)
    extracted: str | None
    reason: str


def score_completions(
    rows: list[dict], texts: list[str], code_options: dict | None = None, math_options: dict | None = None
) -> list[Score]:
    """The verdict of each row's own verifier (`verifier` column: "math" or "code") on its completion.

    One batch per verifier: the math verifier runs its sympy cases in parallel worker processes, the
    code verifier its programs in parallel sandboxes. A dataset may mix math and code rows.
    `math_options` go to the math verifier, e.g. `{"fallbacks": True}` to read an unboxed "Answer: X".
    """
    scores: list[Score | None] = [None] * len(rows)
    by_verifier: dict[str, list[int]] = defaultdict(list)
    for index, row in enumerate(rows):
        by_verifier[row.get("verifier") or "math"].append(index)
    unknown = sorted(set(by_verifier) - {"math", "code"})
    if unknown:
        raise ValueError(
            f"rows name verifier(s) {unknown}; known: 'math', 'code' (row {rows[by_verifier[unknown[0]][0]].get('id')!r})"
        )
    if by_verifier.get("math"):
        from rewards.math import verify_batch

        indices = by_verifier["math"]
        verdicts = verify_batch(
            [rows[i]["answer"] for i in indices],
            [texts[i] for i in indices],
            [rows[i].get("id") for i in indices],
            **(math_options or {}),
        )
        for index, verdict in zip(indices, verdicts, strict=True):
            scores[index] = Score(verdict.correct, verdict.extracted, verdict.reason)
    if by_verifier.get("code"):
        from rewards.code import verify_code_batch

        indices = by_verifier["code"]
        verdicts = verify_code_batch(
            [texts[i] for i in indices], [rows[i].get("tests") for i in indices], **(code_options or {})
        )
        for index, verdict in zip(indices, verdicts, strict=True):
            if verdict is None:
                scores[index] = Score(None, None, "row has no readable tests")
            else:
                scores[index] = Score(verdict.all_passed, None, verdict.reason)
    return scores


def sample_and_score(sampler, rows, params: SamplingParams, chunk_size: int = 64, progress: bool = True):
    """`params.n` samples for every row, each scored; returns one `ProblemResult` per row, in row order."""
    from tqdm.auto import tqdm

    rows = list(rows)
    results = []
    bar = tqdm(total=len(rows), desc="sampling", unit="problem", disable=not progress)
    for start in range(0, len(rows), chunk_size):
        chunk = rows[start : start + chunk_size]
        generated = sampler.generate([row["prompt"] for row in chunk], params, [row["id"] for row in chunk])
        flat_rows = [row for row, samples in zip(chunk, generated, strict=True) for _ in samples]
        verdicts = iter(score_completions(flat_rows, [sample.text for samples in generated for sample in samples]))
        for row, samples in zip(chunk, generated, strict=True):
            result = ProblemResult(row["id"], row.get("answer"), row.get("difficulty"))
            for sample in samples:
                verdict = next(verdicts)
                result.samples.append(
                    {
                        "text": sample.text,
                        "extracted": verdict.extracted,
                        "correct": verdict.correct,  # None: the row cannot be scored (it is not "wrong")
                        "reason": verdict.reason,
                        "num_tokens": sample.num_tokens,
                        "finish_reason": sample.finish_reason,
                    }
                )
            results.append(result)
        bar.update(len(chunk))
    bar.close()
    return results


def summarize_by_difficulty(results: list[ProblemResult]) -> dict:
    """Per difficulty level: problems, samples, mean pass@1, and the share of samples that stopped at EOS."""
    groups: dict = defaultdict(list)
    for result in results:
        groups[result.difficulty].append(result)
    summary = {}
    for level in sorted(groups, key=lambda value: (value is None, value)):
        members = groups[level]
        samples = [sample for result in members for sample in result.samples]
        summary[level] = {
            "problems": len(members),
            "samples": len(samples),
            "pass@1": sum(result.pass_at(1) for result in members) / len(members),
            "stop_rate": sum(sample["finish_reason"] == "stop" for sample in samples) / len(samples),
            "mean_tokens": sum(sample["num_tokens"] for sample in samples) / len(samples),
        }
    return summary
