"""What an evaluation run reports: per-problem metrics (pass@k and maj@k averaged over seeds), the dataset
summary with bootstrap intervals and the spread over seeds, the markdown table and the pass@k plot.
eval/evaluate.py writes these files; eval/compare.py and the demo read and draw them.
"""

from __future__ import annotations

from collections import defaultdict
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


def plot_pass_at_k(summaries: dict[str, dict], ks: list[int], path: Path, title: str) -> None:
    with accuracy_plot(path, title, "k", "pass@k") as axis:
        for label, summary in summaries.items():
            means = [summary["metrics"][f"pass@{k}"]["mean"] for k in ks]
            lows = [summary["metrics"][f"pass@{k}"]["ci95"][0] for k in ks]
            highs = [summary["metrics"][f"pass@{k}"]["ci95"][1] for k in ks]
            axis.plot(ks, means, marker="o", label=label)
            axis.fill_between(ks, lows, highs, alpha=0.2)


def format_table(summaries: dict[str, dict], ks: list[int]) -> str:
    header = ["dataset", "problems"] + [f"pass@{k}" for k in ks] + [f"maj@{ks[-1]}", "tokens", "truncated"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, summary in summaries.items():
        cells = [name, str(summary["problems"])]
        for k in ks:
            metric = summary["metrics"][f"pass@{k}"]
            low, high = metric["ci95"]
            cells.append(f"{metric['mean']:.3f} [{low:.3f}, {high:.3f}]")
        cells += [
            f"{summary['metrics'][f'maj@{ks[-1]}']['mean']:.3f}",
            f"{summary['mean_tokens']:.0f}",
            f"{summary['truncation_rate']:.1%}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
