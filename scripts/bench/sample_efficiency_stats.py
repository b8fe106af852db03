"""What scripts/bench/sample_efficiency.py reports across seeds: the per-variant summary, the paired comparison of
each variant with its parent, the markdown tables and the plot. No training or sampling here, so the tests can
check every figure against hand-computed values on fake per-seed results.

The statistics are eval's own (eval.metrics): `mean_std` for the spread across seeds (what eval.report's
summary calls std_over_seeds) and `bootstrap_ci`, the percentile bootstrap over problems, for each seed's
interval and for the paired comparison. The paired comparison asks whether a variant differs from its parent
on the same held-out problems under the same seeds:

* per seed, the difference of final pass@1 (variant minus parent); its mean and sample std across seeds;
* per problem, that difference averaged over the seeds; a bootstrap over problems of its mean (a paired
  bootstrap: each resample takes a problem's results under both arms together);
* the reading: "higher" or "lower" only when the paired 95% interval excludes 0 *and* every seed's difference
  has that sign; otherwise "no significant difference". With three seeds the sign test alone could not reach
  5%, and the interval alone does not see the training noise between seeds: both must agree.
"""

from __future__ import annotations

from pathlib import Path

from eval.metrics import bootstrap_ci, mean_std

NO_DIFFERENCE = "no significant difference"


def final_point(state: dict) -> tuple[int, dict]:
    """(step, evaluation) of a run's last evaluated checkpoint."""
    step = max(int(step) for step in state["points"])
    return step, state["points"][str(step)]


def per_problem_pass1(point: dict) -> list[float]:
    """Each held-out problem's pass@1: its correct count over the samples drawn for it."""
    n = point["protocol"]["n"]
    return [correct / n for correct in point["num_correct"]]


def variant_summary(by_seed: dict[int, dict]) -> dict:
    """One variant over its seeds: final pass@1 mean and std across seeds, each seed's own interval, and the
    completions it sampled (mean over seeds) and, with dynamic sampling, completions per kept group."""
    seeds = sorted(by_seed)
    finals = {seed: final_point(by_seed[seed]) for seed in seeds}
    pass1 = [finals[seed][1]["pass@1"] for seed in seeds]
    mean, std = mean_std(pass1)
    completions = [finals[seed][1]["completions"] for seed in seeds]
    per_kept = [by_seed[seed].get("completions_per_kept_group") for seed in seeds]
    per_kept = [value for value in per_kept if value is not None]
    n = finals[seeds[0]][1]["protocol"]["n"]
    pass_n = [finals[seed][1][f"pass@{n}"] for seed in seeds]
    return {
        "seeds": seeds,
        "step": max(step for step, _ in finals.values()),
        "pass@1": {"mean": mean, "std": std},
        f"pass@{n}": {"mean": mean_std(pass_n)[0], "std": mean_std(pass_n)[1]},
        "by_seed": {seed: {"pass@1": finals[seed][1]["pass@1"], "ci95": finals[seed][1]["ci95"]} for seed in seeds},
        "completions": sum(completions) / len(completions),
        "completions_per_kept_group": sum(per_kept) / len(per_kept) if per_kept else None,
    }


def paired_comparison(variant: dict[int, dict], parent: dict[int, dict]) -> dict | None:
    """A variant against its parent on the seeds both ran (None when they share none); see the module doc."""
    seeds = sorted(set(variant) & set(parent))
    if not seeds:
        return None
    ours = {seed: final_point(variant[seed])[1] for seed in seeds}
    theirs = {seed: final_point(parent[seed])[1] for seed in seeds}
    differences = [ours[seed]["pass@1"] - theirs[seed]["pass@1"] for seed in seeds]
    mean, std = mean_std(differences)
    per_seed = [
        [a - b for a, b in zip(per_problem_pass1(ours[seed]), per_problem_pass1(theirs[seed]), strict=True)]
        for seed in seeds
    ]
    per_problem = [sum(values) / len(values) for values in zip(*per_seed, strict=True)]
    low, high = bootstrap_ci(per_problem)
    return {
        "seeds": seeds,
        "differences": dict(zip(seeds, differences, strict=True)),
        "mean": mean,
        "std": std,
        "ci95": [low, high],
        "reading": reading(differences, (low, high)),
    }


def reading(differences: list[float], interval: tuple[float, float]) -> str:
    """ "higher" / "lower" when the paired interval excludes 0 and every seed agrees; else no difference."""
    if len(differences) < 2:
        return "one seed: not tested"
    if interval[0] > 0 and all(difference > 0 for difference in differences):
        return "higher"
    if interval[1] < 0 and all(difference < 0 for difference in differences):
        return "lower"
    return NO_DIFFERENCE


# ---------------------------------------------------------------- report


def _pm(stat: dict) -> str:
    return f"{stat['mean']:.3f} ± {stat['std']:.3f}"


def write_table(path: Path, results: dict[str, dict[int, dict]], start: dict, variants: dict, setup: dict) -> None:
    """The per-variant table and the paired comparisons, from whatever (variant, seed) runs are done.

    `results[variant][seed]` is a run's eval.json; `variants[name]` has `.label` and `.parent`; `setup` says
    what was run (steps, problems, samples, model, eval_seed, seeds).
    """
    n = setup["eval_samples"]
    lines = [
        "# Sample efficiency on the synthetic task, over seeds",
        "",
        f"Held-out pass@1 at the final checkpoint ({setup['steps']} steps) on the eval split, levels "
        f"{setup['levels']}, {len(start['num_correct'])} problems (the same for every seed), {n} samples each at "
        f"temperature 1, from the cold-start model `{setup['model']}`. Each variant ran once per seed "
        f"(training seed and data order: seeds {', '.join(map(str, setup['seeds']))}). Mean ± sample std across "
        "seeds; brackets: each seed's 95% bootstrap interval over problems. Completions sampled include dynamic "
        "sampling's extra rounds; per kept group: completions sampled per group that reached the loss with "
        "reward variance.",
        "",
        f"| variant | seeds | pass@1, mean ± std | per seed: pass@1 [95% CI] | pass@{n} | completions sampled "
        "| completions per kept group |",
        "|---|---:|---|---|---|---:|---:|",
        f"| cold start | | {start['pass@1']:.3f} | {start['pass@1']:.3f} [{start['ci95'][0]:.3f}, "
        f"{start['ci95'][1]:.3f}] | {start[f'pass@{n}']:.3f} | 0 | |",
    ]
    summaries = {name: variant_summary(by_seed) for name, by_seed in results.items() if by_seed}
    for name, summary in summaries.items():
        seeds = "; ".join(
            f"{seed}: {cell['pass@1']:.3f} [{cell['ci95'][0]:.3f}, {cell['ci95'][1]:.3f}]"
            for seed, cell in summary["by_seed"].items()
        )
        per_kept = summary["completions_per_kept_group"]
        lines.append(
            f"| {variants[name].label} | {len(summary['seeds'])} | {_pm(summary['pass@1'])} | {seeds} | "
            f"{_pm(summary[f'pass@{n}'])} | {summary['completions']:.0f} | "
            f"{'' if per_kept is None else f'{per_kept:.1f}'} |"
        )
    comparisons = []
    for name in summaries:
        parent = variants[name].parent
        if parent is None:
            continue
        compared = paired_comparison(results[name], results.get(parent, {}))
        if compared is None:
            comparisons.append(f"| {variants[name].label} | {variants[parent].label} | (parent not run) | | | |")
            continue
        differences = ", ".join(f"{difference:+.3f}" for difference in compared["differences"].values())
        comparisons.append(
            f"| {variants[name].label} | {variants[parent].label} | {differences} | "
            f"{compared['mean']:+.3f} ± {compared['std']:.3f} | [{compared['ci95'][0]:+.3f}, "
            f"{compared['ci95'][1]:+.3f}] | {compared['reading']} |"
        )
    if comparisons:
        lines += [
            "",
            "Each variant against its parent, paired on the same seeds and problems: the per-seed difference of "
            "pass@1, its mean ± std across seeds, and a paired bootstrap over problems (each problem's difference "
            "averaged over the seeds). Read as higher or lower only when that interval excludes 0 and every seed "
            "agrees in sign; otherwise no significant difference.",
            "",
            "| variant | vs | difference per seed | mean ± std | paired 95% CI | reading |",
            "|---|---|---|---|---|---|",
            *comparisons,
        ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def mean_curve(by_seed: dict[int, dict]) -> list[tuple[float, float, float]]:
    """(completions, pass@1 mean, pass@1 std) over seeds at each step that every seed evaluated."""
    steps = set.intersection(*({int(step) for step in state["points"]} for state in by_seed.values()))
    curve = []
    for step in sorted(steps):
        points = [state["points"][str(step)] for state in by_seed.values()]
        mean, std = mean_std([point["pass@1"] for point in points])
        curve.append((sum(point["completions"] for point in points) / len(points), mean, std))
    return curve


def write_plot(path: Path, results: dict[str, dict[int, dict]], start: dict, variants: dict, setup: dict) -> None:
    """Held-out pass@1 against completions sampled, mean over seeds with ± std bars, from the cold start."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 5))
    for name, by_seed in results.items():
        if not by_seed:
            continue
        curve = [(0.0, start["pass@1"], 0.0), *mean_curve(by_seed)]
        x, y, err = zip(*curve, strict=True)
        axes.errorbar(x, y, yerr=err, marker="o", capsize=3, label=f"{variants[name].label} ({len(by_seed)} seeds)")
    axes.set_xlabel("completions sampled during training (mean over seeds)")
    axes.set_ylabel(f"held-out pass@1 (levels {setup['levels']})")
    axes.set_title(f"Sample efficiency, {setup['steps']} steps (bars: ± std across seeds)")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)
