"""Difficulty by pass rate: sample each problem n times, score every sample with the row's own verifier,
and keep the problems that can still teach the policy something.

A GRPO group whose samples are all right or all wrong has zero reward variance, hence zero advantage and
no gradient: such problems cost a generation and teach nothing. Three rules, all on the same numbers:

- `window`: keep `lo <= pass_rate <= hi` (e.g. 0 < p < 1: only problems with some variance);
- `kimi` (Kimi k1.5): keep only problems that all n samples fail (best-of-n still fails: the hard ones);
- Qwen3's no-thinking rule (`no_think_filter`): a second, cheap pass with a prompt that asks for the
  answer directly and a short token budget; a problem solved that way needs no reasoning and is dropped.

Scoring goes through `eval.runner.sample_and_score`, which calls the verifiers of `rewards/`: the pass
rate here, the GRPO reward and the evaluator's pass@k are the same code. A row whose gold answer (or
tests) the verifier cannot read, or a math gold that does not even verify against itself, gets no pass
rate (None) and is dropped with that reason: otherwise it would pass as "hard" forever.

Several rewards per row: with `rewards` (the recipe's YAML list of `{name, weight, ...}`) each sample
also gets the weighted sum of those rewards, computed as TRL does (every reward called with the batch's
columns, None counted as 0), and `reward_mean` / `reward_std` columns; with `success_threshold` a sample
passes when that sum reaches the threshold instead of when the verifier says correct.

`sampler` is anything with `generate(prompts, params, keys=None) -> list[list[Sample]]`
(eval.sampler.TransformersSampler, the vLLM sampler, or a scripted stand-in in tests).
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from collections.abc import Sequence

from data_filters.report import StepReport, check_mode
from rewards.verdicts import verifier_of
from tasks.rows import build_prompt, question_text, set_column

logger = logging.getLogger(__name__)

KEEP_RULES = ("window", "kimi", "none")
DEFAULT_NO_THINK_TEMPLATE = "{problem}\n\nGive only the final answer, in \\boxed{}, with no explanation."
# Part of the no-think rule, not a sampling default: an answer given "with no explanation" fits in this many
# tokens, so a sample still going past them is reasoning, which the rule does not count.
NO_THINK_ANSWER_TOKENS = 64


def reference_completion(row: dict) -> str:
    """A completion that states the row's own gold answer, for the self-check of golds."""
    answer = row.get("answer")
    if verifier_of(row) == "code" or answer is None:
        return ""
    answer = str(answer)
    return answer if "\\boxed" in answer else f"\\boxed{{{answer}}}"


def gold_problems(rows: Sequence[dict]) -> list[str | None]:
    """Per row, why it cannot get a pass rate (None when it can): a gold or tests the verifier cannot read,
    or a math gold that its own boxed copy does not match."""
    from rewards.verdicts import score_completions

    scores = score_completions(list(rows), [reference_completion(row) for row in rows])
    problems: list[str | None] = []
    for row, score in zip(rows, scores, strict=True):
        if score.correct is None:
            problems.append(f"cannot be scored: {score.reason}")
        elif verifier_of(row) == "math" and not score.correct:
            problems.append("gold answer does not verify against itself")
        else:
            problems.append(None)
    return problems


def _weighted_rewards(reward_fns, weights, rows: list[dict], results) -> list[list[float]]:
    """Per row, the weighted total reward of each sample, with every reward called once per chunk in TRL's form."""
    completions, prompts, columns = [], [], {}
    keys = [key for key in rows[0] if key != "prompt"] if rows else []
    for row, result in zip(rows, results, strict=True):
        for sample in result.samples:
            conversational = isinstance(row["prompt"], list)
            completions.append([{"role": "assistant", "content": sample["text"]}] if conversational else sample["text"])
            prompts.append(row["prompt"])
            for key in keys:
                columns.setdefault(key, []).append(row.get(key))
            # The sampler keeps token counts, not ids: length rewards read only len(completion_ids).
            columns.setdefault("completion_ids", []).append([0] * sample["num_tokens"])
    totals = [0.0] * len(completions)
    for function, weight in zip(reward_fns, weights, strict=True):
        values = function(completions=completions, prompts=prompts, **columns)
        if len(values) != len(completions):
            raise ValueError(f"reward {function.__name__} returned {len(values)} values for {len(completions)} samples")
        for index, value in enumerate(values):
            if value is not None and not math.isnan(value):  # TRL: None -> NaN, summed with nansum
                totals[index] += weight * float(value)
    per_row, position = [], 0
    for result in results:
        per_row.append(totals[position : position + result.n])
        position += result.n
    return per_row


def measure_pass_rates(
    rows: Sequence[dict],
    sampler,
    params,
    rewards: list[dict] | None = None,
    success_threshold: float | None = None,
    chunk_size: int = 64,
    progress: bool = True,
    keep_samples: bool = False,
) -> list[dict]:
    """Per row: `pass_rate` (None when the row cannot be scored), `pass_count`, `pass_n`, `unscorable` (the
    reason or None) and, with `rewards`, `reward_mean` and `reward_std` of the weighted total. `keep_samples`
    adds `samples`: each sample's text, verdict and total reward, for inspection."""
    from eval.runner import sample_and_score

    if success_threshold is not None and not rewards:
        raise ValueError("success_threshold applies to the weighted sum of `rewards`; give rewards as well")
    rows = list(rows)
    reward_fns, weights = [], []
    if rewards:
        from rewards.registry import build_rewards

        reward_fns, weights = build_rewards(rewards)
    problems = gold_problems(rows)
    scorable = [index for index, problem in enumerate(problems) if problem is None]
    results = sample_and_score(sampler, [rows[index] for index in scorable], params, chunk_size, progress)
    totals: list[list[float]] = []
    for start in range(0, len(scorable), chunk_size):
        if reward_fns:
            chunk = [rows[index] for index in scorable[start : start + chunk_size]]
            totals += _weighted_rewards(reward_fns, weights, chunk, results[start : start + chunk_size])
    out = [
        {"pass_rate": None, "pass_count": 0, "pass_n": 0, "unscorable": problem}
        | ({"reward_mean": None, "reward_std": None} if reward_fns else {})
        for problem in problems
    ]
    for position, (index, result) in enumerate(zip(scorable, results, strict=True)):
        passes = [bool(sample["correct"]) for sample in result.samples]
        if reward_fns:
            sample_totals = totals[position]
            mean = sum(sample_totals) / len(sample_totals)
            out[index]["reward_mean"] = mean
            out[index]["reward_std"] = math.sqrt(sum((t - mean) ** 2 for t in sample_totals) / len(sample_totals))
            if success_threshold is not None:
                passes = [total >= success_threshold for total in sample_totals]
        out[index].update(pass_rate=sum(passes) / len(passes), pass_count=sum(passes), pass_n=len(passes))
        if keep_samples:
            out[index]["samples"] = [
                {"text": sample["text"], "correct": sample["correct"], "passed": passed}
                | ({"reward": totals[position][number]} if reward_fns else {})
                for number, (sample, passed) in enumerate(zip(result.samples, passes, strict=True))
            ]
    return out


def _histogram(rates: list[float | None]) -> dict[str, int]:
    """Rows per pass-rate band, in the report: 0, (0, .25], ..., 1 and unscorable."""
    bands: Counter = Counter()
    for rate in rates:
        if rate is None:
            bands["unscorable"] += 1
        elif rate == 0 or rate == 1:
            bands[f"{rate:g}"] += 1
        else:
            bands[f"({math.ceil(rate * 4 - 1) / 4:g}, {math.ceil(rate * 4) / 4:g}]"] += 1
    order = ["0", "(0, 0.25]", "(0.25, 0.5]", "(0.5, 0.75]", "(0.75, 1]", "1", "unscorable"]
    return {band: bands[band] for band in order if bands[band]}


def add_pass_rates(dataset, sampler, params, rewards=None, success_threshold=None, chunk_size=64, progress=True):
    """The dataset with `pass_rate`, `pass_count`, `pass_n` (and `reward_mean`/`reward_std`) columns, and the
    measured rows' pass-rate histogram."""
    rows = dataset.to_list()
    measured = measure_pass_rates(rows, sampler, params, rewards, success_threshold, chunk_size, progress)
    dtypes = {"pass_rate": "float64", "pass_count": "int64", "pass_n": "int64", "unscorable": "string"}
    dtypes |= {"reward_mean": "float64", "reward_std": "float64"}
    for column in measured[0] if measured else []:
        if column in dtypes:
            dataset = set_column(dataset, column, [entry[column] for entry in measured], dtypes[column])
    return dataset, _histogram([entry["pass_rate"] for entry in measured])


def keep_by_pass_rate(dataset, rule: str = "window", lo: float = 0.0, hi: float = 1.0, mode: str = "drop"):
    """Keep the rows the rule selects (rows without a pass rate are never kept). Returns `(dataset, StepReport)`;
    in tag mode every row stays and `pass_rate_kept` says what the rule decided."""
    check_mode(mode, "pass_rate")
    if rule not in KEEP_RULES:
        raise ValueError(f"pass_rate keep rule must be one of {KEEP_RULES}, got {rule!r}")
    if not 0.0 <= lo <= hi <= 1.0:
        raise ValueError(f"pass_rate window needs 0 <= lo <= hi <= 1, got lo={lo}, hi={hi}")
    if "pass_rate" not in dataset.column_names:
        raise ValueError("keep_by_pass_rate needs a pass_rate column: run the pass_rate step (add_pass_rates) first")
    reasons: Counter = Counter()
    keep = []
    for rate, problem in zip(dataset["pass_rate"], _column(dataset, "unscorable"), strict=True):
        if rate is None:
            reasons[problem or "no pass rate"] += 1
            keep.append(False)
        elif rule == "kimi" and rate > 0:
            reasons["solved at least once (kimi: keep only problems all samples fail)"] += 1
            keep.append(False)
        elif rule == "window" and rate < lo:
            reasons[f"pass rate below {lo:g}"] += 1
            keep.append(False)
        elif rule == "window" and rate > hi:
            reasons[f"pass rate above {hi:g}"] += 1
            keep.append(False)
        else:
            keep.append(True)
    if mode == "drop":
        result = dataset.select([index for index, kept in enumerate(keep) if kept])
    else:
        result = set_column(dataset, "pass_rate_kept", keep, "bool")
    report = StepReport(
        "pass_rate", len(dataset), len(result), mode, flagged=keep.count(False), reasons=dict(reasons.most_common())
    )
    report.details = {"rule": rule} | ({"lo": lo, "hi": hi} if rule == "window" else {})
    return result, report


def _column(dataset, name: str) -> list:
    return dataset[name] if name in dataset.column_names else [None] * len(dataset)


def pass_rate_filter(dataset, sampler, params, rule="window", lo=0.0, hi=1.0, mode="drop", **measure_options):
    """`add_pass_rates` then `keep_by_pass_rate`, as one step with one report."""
    started = time.perf_counter()
    measured, histogram = add_pass_rates(dataset, sampler, params, **measure_options)
    result, report = keep_by_pass_rate(measured, rule, lo, hi, mode)
    report.seconds = time.perf_counter() - started
    report.details.update(n=params.n, max_new_tokens=params.max_new_tokens, histogram=histogram)
    logger.info("pass_rate: %d of %d rows kept (%s); pass rates %s", len(result), len(dataset), rule, histogram)
    return result, report


def no_think_filter(
    dataset,
    sampler,
    params,
    threshold: float = 0.0,
    user_template: str = DEFAULT_NO_THINK_TEMPLATE,
    system_prompt: str | None = None,
    question_field: str = "problem",
    mode: str = "drop",
    chunk_size: int = 64,
    progress: bool = True,
):
    """Qwen3's rule: ask each question for its answer directly (no reasoning, a short `params.max_new_tokens`)
    and drop the rows solved more often than `threshold` (0: solved even once). Adds `no_think_pass_rate`.

    Rows the verifier cannot score are kept (this rule only removes problems it shows to be easy) and counted.
    For a Qwen3 model, put its switch in the template: "{problem} /no_think".
    """
    check_mode(mode, "no_think")
    if "{problem}" not in user_template:
        raise ValueError(f"no_think: user_template must contain '{{problem}}', got {user_template!r}")
    started = time.perf_counter()
    rows = dataset.to_list()
    direct = [
        {**row, "prompt": build_prompt(question_text(row, question_field), system_prompt, user_template)}
        for row in rows
    ]
    measured = measure_pass_rates(direct, sampler, params, chunk_size=chunk_size, progress=progress)
    rates = [entry["pass_rate"] for entry in measured]
    solved = [rate is not None and rate > threshold for rate in rates]
    tagged = set_column(dataset, "no_think_pass_rate", rates, "float64")
    result = tagged.select([i for i, easy in enumerate(solved) if not easy]) if mode == "drop" else tagged
    report = StepReport.timed(
        "no_think",
        dataset,
        result,
        mode,
        sum(solved),
        {f"solved without thinking (pass rate above {threshold:g})": sum(solved)} if any(solved) else {},
        started,
        details={
            "n": params.n,
            "max_new_tokens": params.max_new_tokens,
            "threshold": threshold,
            "unscorable (kept)": sum(rate is None for rate in rates),
            "histogram": _histogram(rates),
        },
    )
    logger.info("no_think: %d of %d rows solved without thinking", sum(solved), len(dataset))
    return result, report
