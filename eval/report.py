"""What an evaluation run reports: per-problem metrics (pass@k and maj@k averaged over seeds), the dataset
summary with bootstrap intervals and the spread over seeds, the markdown table and the pass@k plot.
eval/evaluate.py writes these files; eval/compare.py and the demo read and draw them.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from contextlib import contextmanager
from pathlib import Path

from eval.metrics import bootstrap_ci, maj_at_k, mean_at_n, mean_std, pass_at_k
from rewards.verdicts import verifier_of


def problem_metrics(row: dict, by_seed: dict[int, list[dict]], ks: list[int]) -> dict:
    """pass@k and maj@k per problem, averaged over seeds, with the counts behind them."""
    from eval.voting import answer_classes

    result = {"id": row["id"], "answer": row.get("answer"), "difficulty": row.get("difficulty"), "seeds": {}}
    # A row the verifier cannot score (its gold does not parse, its tests are unreadable) counts nowhere.
    result["scored"] = any(sample["correct"] is not None for samples in by_seed.values() for sample in samples)
    result["votes"] = verifier_of(row) == "math"  # maj@k needs answers to vote on: a math row's extracted ones
    per_k: dict[str, list[float]] = defaultdict(list)
    for seed, samples in sorted(by_seed.items()):
        n, c = len(samples), sum(bool(sample["correct"]) for sample in samples)
        result["seeds"][str(seed)] = {"n": n, "c": c}
        classes, correct = answer_classes(samples) if verifier_of(row) == "math" else ([None] * n, None)
        for k in ks:
            per_k[f"pass@{k}"].append(pass_at_k(n, c, k))
            per_k[f"maj@{k}"].append(maj_at_k(classes, correct, k))
        per_k["mean@n"].append(mean_at_n([float(bool(sample["correct"])) for sample in samples]))
    for name, values in per_k.items():
        result[name] = sum(values) / len(values)
    everything = [sample for samples in by_seed.values() for sample in samples]
    result["mean_tokens"] = sum(sample["num_tokens"] for sample in everything) / len(everything)
    result["truncated"] = sum(sample["finish_reason"] == "length" for sample in everything) / len(everything)
    return result


def summarize(per_problem: list[dict], ks: list[int], seeds: list[int]) -> dict:
    unscored = [problem["id"] for problem in per_problem if not problem["scored"]]
    per_problem = [problem for problem in per_problem if problem["scored"]]
    if not per_problem:
        raise ValueError(f"no problem could be scored (unreadable gold answers or tests: {unscored[:5]} ...)")
    metrics = {}
    for name in [f"pass@{k}" for k in ks] + [f"maj@{k}" for k in ks] + ["mean@n"]:
        values = [problem[name] for problem in per_problem]
        low, high = bootstrap_ci(values)
        by_seed = []
        for seed in seeds:
            if name.startswith("pass@"):
                k = int(name[5:])
                by_seed.append(
                    sum(pass_at_k(p["seeds"][str(seed)]["n"], p["seeds"][str(seed)]["c"], k) for p in per_problem)
                    / len(per_problem)
                )
        mean, std = mean_std(by_seed) if by_seed else (sum(values) / len(values), 0.0)
        metrics[name] = {"mean": mean, "std_over_seeds": std, "ci95": [low, high]}
        if by_seed:
            metrics[name]["by_seed"] = dict(zip(map(str, seeds), by_seed, strict=True))
    return {
        "problems": len(per_problem),
        "unscored_problems": unscored,
        "metrics": metrics,
        "majority_vote": any(problem.get("votes", True) for problem in per_problem),  # else maj@k is not defined
        "mean_tokens": sum(p["mean_tokens"] for p in per_problem) / len(per_problem),
        "truncation_rate": sum(p["truncated"] for p in per_problem) / len(per_problem),
    }


@contextmanager
def accuracy_plot(path: Path, title: str, xlabel: str, ylabel: str, legend_size: int | None = None):
    """The axis of one figure of accuracy (0 to 1) against a log2 x axis, styled and saved to `path` on exit:
    the pass@k curves here and the thinking-budget curves of eval/budget.py look alike."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(5.5, 3.8))
    try:
        yield axis
        axis.set_xscale("log", base=2)
        axis.set_xlabel(xlabel)
        axis.set_ylabel(ylabel)
        axis.set_ylim(0, 1)
        axis.set_title(title)
        axis.grid(alpha=0.3)
        axis.legend(fontsize=legend_size)
        figure.tight_layout()
        figure.savefig(path, dpi=120)
    finally:
        plt.close(figure)


MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def curve_styles(curves: dict[str, list[float]]) -> dict[str, dict]:
    """Legend label and line style per curve, so that no curve hides another.

    Each curve gets its own marker shape; a curve equal at every point to one drawn before it is drawn
    dashed, with larger hollow markers around the first one's, and its label says "identical to <first>"
    (two runs at 0.000 everywhere would otherwise show as one line).
    """
    styles: dict[str, dict] = {}
    firsts: list[tuple[str, list[float]]] = []
    for position, (label, values) in enumerate(curves.items()):
        style = {"label": label, "marker": MARKERS[position % len(MARKERS)], "markersize": 6, "linestyle": "-"}
        twin = next((first for first, seen in firsts if seen == values), None)
        if twin is None:
            firsts.append((label, values))
        else:
            style.update(label=f"{label} (identical to {twin})", markersize=11, markerfacecolor="none", linestyle="--")
        styles[label] = style
    return styles


def plot_pass_at_k(summaries: dict[str, dict], ks: list[int], path: Path, title: str) -> list[str]:
    """Draw pass@k against k with 95% bands; returns the legend's labels."""
    curves = {label: [summary["metrics"][f"pass@{k}"]["mean"] for k in ks] for label, summary in summaries.items()}
    styles = curve_styles(curves)
    with accuracy_plot(path, title, "k", "pass@k") as axis:
        for label, summary in summaries.items():
            lows = [summary["metrics"][f"pass@{k}"]["ci95"][0] for k in ks]
            highs = [summary["metrics"][f"pass@{k}"]["ci95"][1] for k in ks]
            axis.plot(ks, curves[label], clip_on=False, **styles[label])  # markers at 0 or 1 shown whole
            axis.fill_between(ks, lows, highs, alpha=0.2)
    return [styles[label]["label"] for label in summaries]


def format_table(summaries: dict[str, dict], ks: list[int]) -> str:
    header = ["dataset", "problems"] + [f"pass@{k}" for k in ks] + [f"maj@{ks[-1]}", "tokens", "truncated"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, summary in summaries.items():
        cells = [name, str(summary["problems"])]
        for k in ks:
            metric = summary["metrics"][f"pass@{k}"]
            low, high = metric["ci95"]
            cells.append(f"{metric['mean']:.3f} [{low:.3f}, {high:.3f}]")
        vote = summary["metrics"][f"maj@{ks[-1]}"]
        cells += [
            f"{vote['mean']:.3f} [{vote['ci95'][0]:.3f}, {vote['ci95'][1]:.3f}]"
            if summary.get("majority_vote", True)
            else "n/a (no answers to vote on)",
            f"{summary['mean_tokens']:.0f}",
            f"{summary['truncation_rate']:.1%}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ---------------------------------------------------------------- why samples fail

# Reasons the math verifier gives after comparing an answer with the gold: when the sample is wrong, the answer
# was read and is simply not the gold's value.
COMPARISON_REASONS = frozenset(
    {
        "math-verify",
        "exact number comparison",
        "multiple-choice letter",
        "numeral in base",
        "a number is not an expression in variables",
        "one value against several",
        "values far apart",
        "same text as a gold that math-verify reads",
    }
)
_CODE_CASE = re.compile(r"^case \d+: ")
CUT = "(cut at --max-new-tokens)"
# no answer found (with --answer-fallbacks: "no boxed answer and no 'the answer is' statement")
_UNREAD_ANSWER = ("no boxed answer", "reasoning never closed with </think>", "empty completion")


def outcome_label(sample: dict) -> str:
    """One sample's outcome in a few words: "correct", "wrong answer", or why it could not be credited."""
    if sample.get("correct"):
        return "correct"
    reason = str(sample.get("reason") or "no reason recorded")
    if sample.get("correct") is None:
        return f"not scored: {reason}"
    if reason in COMPARISON_REASONS:
        return "wrong answer"
    if reason.startswith("verification overran"):
        return "verification timeout"
    if reason.startswith("verifier error"):
        return "verifier error"
    if _CODE_CASE.match(reason):  # the code verifier's "case 3: timeout (2 s)": the kind of failure only
        return code_outcome(_CODE_CASE.sub("", reason))
    if reason.startswith(_UNREAD_ANSWER) and sample.get("finish_reason") == "length":
        return f"{reason} {CUT}"
    return reason


# The code judge's reasons for a failed case, and the one label each kind of failure gets.
_CODE_OUTCOMES = (  # (pattern, label: `{}` takes the pattern's group)
    (re.compile(r"^(?:AssertionError\b|wrong answer)"), "wrong answer"),
    (re.compile(r"^(?:CandidateFailed: )?the (?:candidate|solution) raised (\w+)"), "the solution raised {}"),
    (re.compile(r"^(?:CandidateFailed: )?the program ended"), "the program ended early"),
    (re.compile(r"^timeout\b"), "timeout"),
    (re.compile(r"^memory\b"), "memory"),
    (re.compile(r"^error\b"), "the program failed"),
)


def code_outcome(reason: str) -> str:
    """One label per kind of code failure, whichever way the judge worded it (a call that raised and a module
    that raised as it loaded are both "the solution raised X"); anything else keeps its own first words."""
    for pattern, label in _CODE_OUTCOMES:
        match = pattern.match(reason)
        if match:
            return label.format(*match.groups())
    return re.split(r" \(|: ", reason, maxsplit=1)[0]


def outcome_shares(samples: list[dict]) -> dict[str, float]:
    """The share of all samples per outcome (they sum to 1), largest first: where pass@k's zeros come from."""
    counts = Counter(outcome_label(sample) for sample in samples)
    return {label: count / len(samples) for label, count in counts.most_common()} if samples else {}


def format_outcomes(summaries: dict[str, dict], folders: dict[str, Path]) -> str:
    """Per dataset: the share of each outcome, a hint when most samples box no answer, and the files written."""
    lines = []
    for name, summary in summaries.items():
        shares = summary.get("outcomes") or {}
        detail = ", ".join(f"{label} {share:.1%}" for label, share in shares.items())
        lines.append(f"{name}: {summary.get('samples', '?')} samples: {detail}")
        unboxed = (share for label, share in shares.items() if label.startswith("no boxed answer") and CUT not in label)
        if sum(unboxed) >= 0.5:
            fallbacks = (
                "" if (summary.get("protocol") or {}).get("answer_fallbacks") else ", or pass --answer-fallbacks"
            )
            lines.append(
                "  most samples have no \\boxed{} answer, the kind the verifier reads: ask for one with "
                f"--user-template or --system-prompt{fallbacks}"
            )
        if sum(share for label, share in shares.items() if CUT in label) >= 0.5:
            lines.append("  most samples stopped at --max-new-tokens before an answer: raise it")
        folder = folders[name]
        lines.append(f"  written to {folder}/: {folder / 'summary.json'}, {folder / 'samples.jsonl'}")
        lines.append("  (per_problem.jsonl, pass_at_k.png and protocol.json beside them)")
    return "\n".join(lines)
