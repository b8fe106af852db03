"""The report of scripts/bench/tool_arms.py, read as docs/readouts/what-tools-buy.md fixed it before the first run:

- per arm, per seed: held-out pass@1, and each arm's gain over its own cold start, per seed and pooled;
- the read-out's comparisons, tool_dapo minus text_dapo, minus tool_sft_more and minus tool_rft: seed k against
  seed k and pooled over the seeds both have (per problem the mean over seeds of the difference, bootstrapped over
  problems, 95%), each with its word: **wins** (interval above 0), **loses** (below), **not distinguished**;
- the decomposition: tool_cold_withheld minus the tool cold start, text_cold_given minus the text cold start;
- the headline: the arm with the highest pooled pass@1 and its margin over the next, with its interval;
- the curves of tool_dapo's training (its metrics.jsonl), the share of correct answers that used a tool (each
  evaluation's summary `tools` block), and each job's minutes and the core-minutes in all.

Statistics are real_model_arms_report's (arm_results, seed_means, seed_paired, seed_runs) and eval.metrics'.
"""

from __future__ import annotations

import json
from pathlib import Path

from pooled_gain import per_problem  # scripts/, on sys.path through tool_arms

from eval.metrics import paired_difference
from scripts.bench.real_model_arms_report import arm_results, seed_means, seed_paired, seed_runs

COLD_OF = {"text_dapo": "text_cold", "tool_dapo": "tool_cold", "tool_sft_more": "tool_cold", "tool_rft": "tool_cold"}
COMPARISONS = [("tool_dapo", "text_dapo"), ("tool_dapo", "tool_sft_more"), ("tool_dapo", "tool_rft")]
DECOMPOSITION = {  # evaluation -> (the one it is read against, what the difference says)
    "tool_cold_withheld": ("tool_cold", "the tool cold start without its tool: what is in its weights"),
    "text_cold_given": ("text_cold", "the text cold start given the tool: what the tool alone gives"),
}
# tool_dapo's training curves: label -> metrics.jsonl key (eval/tools/stats.tool_metrics, TRL's GRPOTrainer,
# recipes/stages/grpo/dynamic_sampling.py)
CURVES = {
    "tool calls / completion": "tools/calls_per_completion",
    "failed share of calls": "tools/failure_frac",
    "turns": "tools/turns_mean",
    "tokens / completion": "completions/mean_length",
    "entropy": "entropy",
    "groups with reward variance": "dynamic_sampling/groups_kept_with_variance",
    "groups generated": "dynamic_sampling/groups_generated",
}


def decision(low: float, high: float) -> str:
    """The read-out's words for a pooled interval of (first - second)."""
    return "wins" if low > 0 else "loses" if high < 0 else "not distinguished"


def interval(d: dict) -> str:
    return f"{d['mean']:+.3f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}]"


def pooled_pass(runs: dict[int, dict[str, float]]) -> float:
    """An arm's pooled pass@1: the mean over problems of its per-problem mean over seeds."""
    means = seed_means(runs)
    return sum(means.values()) / len(means)


def headline(arm_runs: dict[str, dict[int, dict[str, float]]]) -> dict | None:
    """The arm with the highest pooled pass@1 and its margin over the next (seed k against seed k, pooled,
    bootstrapped over problems); `distinguished` when that margin's interval excludes 0."""
    ranked = sorted(arm_runs, key=lambda arm: pooled_pass(arm_runs[arm]), reverse=True)
    if len(ranked) < 2:
        return None
    top, runner_up = ranked[:2]
    margin = seed_paired(arm_runs[runner_up], arm_runs[top])
    return {"top": top, "next": runner_up, "pass@1": {arm: pooled_pass(arm_runs[arm]) for arm in ranked},
            "margin": margin, "distinguished": margin["ci95"][0] > 0}  # fmt: skip


def curves(metrics_file: Path) -> dict[str, dict[int, float]]:
    """Each CURVES key's value per training step (a resumed step: its later record), from one metrics.jsonl."""
    steps = {}
    for line in metrics_file.read_text().splitlines():
        record = json.loads(line) if line.strip() else {}
        if "loss" in record and "step" in record:
            steps[record["step"]] = record
    return {key: {step: r[key] for step, r in sorted(steps.items()) if key in r} for key in CURVES.values()}


def mean_curves(per_seed: dict[int, dict[str, dict[int, float]]]) -> dict[str, dict[int, float]]:
    """Per key and step, the mean over the seeds that logged it."""
    merged: dict[str, dict[int, list[float]]] = {}
    for seed_curves in per_seed.values():
        for key, values in seed_curves.items():
            for step, value in values.items():
                merged.setdefault(key, {}).setdefault(step, []).append(value)
    return {key: {step: sum(v) / len(v) for step, v in sorted(steps.items())} for key, steps in merged.items()}


def steps_minutes(metrics_file: Path) -> float:
    """A training run's minutes as its steps timed them (`timing_s/step`, the last record of each step): what the
    run costs uninterrupted. timings.json times a job from its last start, so a run resumed after a cut-off session
    counts only its last part there."""
    if not metrics_file.is_file():
        return 0.0
    steps = {}
    for line in metrics_file.read_text().splitlines():
        record = json.loads(line) if line.strip() else {}
        if "timing_s/step" in record and "step" in record:
            steps[record["step"]] = record["timing_s/step"]
    return sum(steps.values()) / 60


def cost(minutes: dict[str, float], cores: dict[str, int] | None = None) -> dict:
    """Each job's minutes (the bench's timings.json), its core-minutes (minutes x the cores it held: one each here)
    and their sums."""
    jobs = {name: {"minutes": m, "core_minutes": m * (cores or {}).get(name, 1)} for name, m in minutes.items()
            if name != "this run"}  # fmt: skip
    return {"jobs": jobs, "minutes": sum(job["minutes"] for job in jobs.values()),
            "core_minutes": sum(job["core_minutes"] for job in jobs.values())}  # fmt: skip


def _evaluation(folder: Path) -> dict | None:
    if not (folder / "done").exists():
        return None
    summary = next(folder.glob("*/summary.json"), None)
    return None if summary is None else json.loads(summary.read_text())


def write_report(
    args, labels: dict[str, str], folders: dict[str, Path], runs: dict[str, Path], minutes: dict[str, float],
    quiet: bool = False,
) -> dict:  # fmt: skip
    """report.md and results.json in args.output_dir from the finished evaluations (`folders`: evaluation name ->
    eval.evaluate's folder; `runs`: training name -> its folder; `minutes`: job -> minutes). An arm with a seed still
    missing is reported on the seeds it has; what is missing is listed."""
    summaries = {name: s for name, folder in folders.items() if (s := _evaluation(folder)) is not None}
    values = {name: per_problem(folders[name], None, "pass@1")[1] for name in summaries}
    seeds = list(args.seeds)
    results: dict = {"seeds": seeds, "evaluations": {}, "arms": {}, "comparisons": {}, "decomposition": {}}
    for name, summary in summaries.items():
        results["evaluations"][name] = {"pass@1": sum(values[name].values()) / len(values[name]),
                                        "problems": len(values[name]), "tools": summary.get("tools")}  # fmt: skip
    arm_runs = {arm: runs_ for arm in labels if (runs_ := seed_runs(values, arm, seeds))}
    for arm, arm_seeds in arm_runs.items():
        cold = COLD_OF[arm]
        if cold not in values:
            continue
        entry = arm_results(values[cold], arm_seeds)
        results["arms"][arm] = {"cold_start": cold, "pooled_pass@1": pooled_pass(arm_seeds), **entry}
    for first, second in COMPARISONS:
        if first in arm_runs and second in arm_runs and set(arm_runs[first]) & set(arm_runs[second]):
            d = seed_paired(arm_runs[second], arm_runs[first])
            results["comparisons"][f"{first} - {second}"] = {**d, "decision": decision(*d["ci95"])}
    for name, (against, meaning) in DECOMPOSITION.items():
        if name in values and against in values:
            mean, (low, high), problems = paired_difference(values[against], values[name])
            results["decomposition"][f"{name} - {against}"] = {"mean": mean, "ci95": [low, high], "problems": problems,
                                                               "meaning": meaning}  # fmt: skip
    results["headline"] = headline(arm_runs)
    per_seed_curves = {}
    for seed in seeds:
        metrics = runs.get(f"tool_dapo_s{seed}", Path("/nonexistent")) / "metrics.jsonl"
        if metrics.is_file():
            per_seed_curves[seed] = curves(metrics)
    results["curves"] = {"per_seed": per_seed_curves, "mean": mean_curves(per_seed_curves)}
    results["budgets"] = {}
    for name, folder in runs.items():
        if (folder / "budget.json").is_file():  # what a sized arm was given (tool_arms.py writes it)
            results["budgets"][name] = json.loads((folder / "budget.json").read_text())
    minutes, resumed = dict(minutes), []
    for name, folder in runs.items():  # a resumed run: its steps' own times, not its last attempt's minutes
        if name in minutes and (stepped := steps_minutes(folder / "metrics.jsonl")) > minutes[name]:
            minutes[name] = stepped
            resumed.append(name)
    results["cost"] = {**cost(minutes), "resumed": resumed}
    lines = render(results, labels)
    missing = [name for name in folders if name not in summaries]
    if missing:
        lines += ["", f"Not evaluated yet: {', '.join(missing)}."]
    text = "\n".join(lines) + "\n"
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "report.md").write_text(text)
    (args.output_dir / "results.json").write_text(json.dumps(results, indent=1, default=str))
    if not quiet:
        print(text)
    return results


def render(results: dict, labels: dict[str, str]) -> list[str]:
    evaluations, seeds = results["evaluations"], results["seeds"]
    lines = ["# What tool use buys SmolLM2-135M on arithmetic-hard:1-4 (docs/readouts/what-tools-buy.md)", "",
             f"Held-out pass@1, seeds {', '.join(map(str, seeds))}. Pooled = per problem the mean over seeds, "
             "bootstrapped over problems (95%); differences pair seed k with seed k.", ""]  # fmt: skip
    once = [name for name in ("text_cold", "tool_cold", "tool_cold_withheld", "text_cold_given") if name in evaluations]
    if once:
        lines += ["| evaluation (once) | pass@1 | problems |", "|---|---:|---:|"]
        lines += [f"| {name} | {evaluations[name]['pass@1']:.3f} | {evaluations[name]['problems']} |" for name in once]
        lines.append("")
    if results["arms"]:
        lines += ["| arm | per seed pass@1 | pooled pass@1 | gain over its cold start: per seed | pooled gain [95% CI] |",
                  "|---|---|---:|---|---|"]  # fmt: skip
        for arm, entry in results["arms"].items():
            per_seed = ", ".join(f"{seed}: {s['pass@1']:.3f}" for seed, s in entry["seeds"].items())
            gains = ", ".join(f"{s['gain']:+.3f}" for s in entry["seeds"].values())
            lines.append(f"| {arm} ({labels[arm]}; from {entry['cold_start']}) | {per_seed} | "
                         f"{entry['pooled_pass@1']:.3f} | {gains} | {interval(entry['pooled_gain'])} |")  # fmt: skip
        lines.append("")
    if results["comparisons"]:
        lines += ["The read-out's comparisons (first minus second):", "",
                  "| comparison | per seed | pooled [95% CI] | reading |", "|---|---|---|---|"]  # fmt: skip
        for name, d in results["comparisons"].items():
            per_seed = ", ".join(f"{seed}: {value:+.3f}" for seed, value in d["per_seed"].items())
            first = name.split(" - ")[0]
            lines.append(f"| {name} | {per_seed} | {interval(d)} | {first} **{d['decision']}** |")
        lines.append("")
    if results["decomposition"]:
        lines += ["The decomposition:", "", "| difference | [95% CI] | what it says |", "|---|---|---|"]
        lines += [f"| {name} | {interval(d)} | {d['meaning']} |" for name, d in results["decomposition"].items()]
        lines.append("")
    top = results["headline"]
    if top:
        margin = interval(top["margin"])
        if top["distinguished"]:
            lines.append(f"Headline: {top['top']} has the highest pooled pass@1 ({top['pass@1'][top['top']]:.3f}), "
                         f"{margin} over {top['next']}.")  # fmt: skip
        else:
            lines.append(f"Headline: the top arms are not distinguished: {top['top']} "
                         f"{top['pass@1'][top['top']]:.3f}, {top['next']} {top['pass@1'][top['next']]:.3f}, "
                         f"margin {margin}.")  # fmt: skip
        lines.append("")
    tooled = {name: e["tools"] for name, e in evaluations.items() if e.get("tools")}
    if tooled:
        lines += ["Tool use in the evaluations with the tool (summary.json's `tools`):", "",
                  "| evaluation | correct answers that used a tool | completions that used one | calls / completion "
                  "| failed share of calls |", "|---|---:|---:|---:|---:|"]  # fmt: skip
        for name, t in tooled.items():
            lines.append(f"| {name} | {t['correct_used_tool_frac']:.3f} | {t['used_tool_frac']:.3f} | "
                         f"{t['calls_per_completion']:.2f} | {t['failure_frac']:.3f} |")  # fmt: skip
        lines.append("")
    mean = results["curves"]["mean"]
    if mean:
        keys = [(label, key) for label, key in CURVES.items() if key in mean]
        steps = sorted({step for key in mean.values() for step in key})
        lines += [f"tool_dapo's training, mean over seeds {', '.join(map(str, results['curves']['per_seed']))} "
                  "(metrics.jsonl; per seed in results.json):", "",
                  "| step | " + " | ".join(label for label, _ in keys) + " |",
                  "|---:|" + "---:|" * len(keys)]  # fmt: skip
        for step in steps:
            cells = [f"{mean[key][step]:.3f}" if step in mean[key] else "" for _, key in keys]
            lines.append(f"| {step} | " + " | ".join(cells) + " |")
        lines.append("")
    if results["budgets"]:
        lines += ["Budgets the sized arms took from tool_dapo of their seed:", ""]
        for name, budget in results["budgets"].items():
            lines.append(f"- {name}: {budget['completions']} completions sampled, {budget['tokens_trained']} tokens "
                         f"trained, {budget['steps']} steps")  # fmt: skip
        lines.append("")
    cost_ = results["cost"]
    if cost_["jobs"]:
        lines += ["Cost (minutes per job, one core each, timings.json):", "", "| job | minutes |", "|---|---:|"]
        for name, job in sorted(cost_["jobs"].items()):
            note = " (resumed: the sum of its steps' times)" if name in cost_["resumed"] else ""
            lines.append(f"| {name}{note} | {job['minutes']:.1f} |")
        lines += ["", f"In all {cost_['core_minutes']:.0f} core-minutes: about {cost_['core_minutes'] / 2:.0f} min "
                  "on 2 cores kept busy."]  # fmt: skip
    return lines
