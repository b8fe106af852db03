"""Sample completions for schema rows and score each one with the row's verifier.

The one place where "generate, then ask the verifier" happens; which verifier scores a row, and how,
is rewards.verdicts' (`score_completions`), so every stage counts a problem as solved by the same rule.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import asdict, dataclass, field

from eval.metrics import pass_at_k
from eval.sampler import SamplingParams
from rewards.verdicts import score_completions

logger = logging.getLogger(__name__)


@dataclass
class ProblemResult:
    """All samples of one problem with their verdicts."""

    id: str
    answer: str | None
    difficulty: int | None
    # text, extracted, correct, reason, num_tokens, finish_reason (with tools: conversation, tool_calls, ...)
    samples: list[dict] = field(default_factory=list)

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


def scored_chunks(
    sampler, rows: list[dict], params: SamplingParams, chunk_size: int = 64, math_options: dict | None = None
):
    """Generate `params.n` samples for each row and score them, `chunk_size` rows at a time.

    Yields, per chunk, a list of `(row, [(sample, score), ...])` in row order, so a caller can write its
    results as it goes (eval/evaluate.py appends each chunk to disk; a killed run resumes from there).
    """
    for start in range(0, len(rows), chunk_size):
        chunk = rows[start : start + chunk_size]
        generated = sampler.generate([row["prompt"] for row in chunk], params, [row["id"] for row in chunk])
        flat_rows = [row for row, samples in zip(chunk, generated, strict=True) for _ in samples]
        texts = [sample.text for samples in generated for sample in samples]
        scores = iter(score_completions(flat_rows, texts, math_options=math_options))
        yield [
            (row, [(sample, next(scores)) for sample in samples]) for row, samples in zip(chunk, generated, strict=True)
        ]


def sample_and_score(sampler, rows, params: SamplingParams, chunk_size: int = 64, progress: bool = True):
    """`params.n` samples for every row, each scored; returns one `ProblemResult` per row, in row order."""
    from tqdm.auto import tqdm

    rows = list(rows)
    results = []
    bar = tqdm(total=len(rows), desc="sampling", unit="problem", disable=not progress)
    for chunk in scored_chunks(sampler, rows, params, chunk_size):
        for row, scored in chunk:
            result = ProblemResult(row["id"], row.get("answer"), row.get("difficulty"))
            for sample, verdict in scored:
                result.samples.append(
                    {
                        "text": sample.text,
                        "extracted": verdict.extracted,
                        "correct": verdict.correct,  # None: the row cannot be scored (it is not "wrong")
                        "reason": verdict.reason,
                        "num_tokens": sample.num_tokens,
                        "finish_reason": sample.finish_reason,
                        **(sample.tool_use or {}),  # with tools: the conversation and its figures (eval/tools)
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
