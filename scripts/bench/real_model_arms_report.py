"""The report of scripts/bench/real_model_arms.py: each arm's held-out pass@1 gain over the cold start per seed and
pooled over seeds, and DAPO minus each arm pooled over seeds, all paired on the held-out problems.

Pooling (scripts/demo_real_report.pooled_gain): per problem, the mean over seeds of (run - cold start), then the
mean over problems with a bootstrap interval over problems. Between two arms, the same with the per-problem means
over each arm's seeds: the seeds of two arms are not paired (seed k of DAPO and seed k of RFT share nothing but
the number), the problems are.
"""

from __future__ import annotations

import json
from pathlib import Path

from demo_real_report import pooled_gain  # scripts/, on sys.path through real_model_arms
from pooled_gain import per_problem

from eval.metrics import mean_std, paired_difference


def _interval(mean: float, low: float, high: float) -> str:
    return f"{mean:+.3f} [{low:+.3f}, {high:+.3f}]"


def _reading(low: float, high: float, better: str, worse: str) -> str:
    return better if low > 0 else worse if high < 0 else "no difference beyond noise"


def arm_results(cold: dict[str, float], runs: dict[int, dict[str, float]]) -> dict:
    """Per seed: pass@1 and the paired gain over the cold start; over seeds: their mean ± std and the pooled gain."""
    seeds = {}
    for seed, values in sorted(runs.items()):
        gain, (low, high), problems = paired_difference(cold, values)
        seeds[seed] = {"pass@1": sum(values.values()) / len(values), "gain": gain, "ci95": [low, high],
                       "problems": problems}  # fmt: skip
    mean, std = mean_std([seed["gain"] for seed in seeds.values()])
    gain, (low, high), problems = pooled_gain(cold, list(runs.values()))
    return {"seeds": seeds, "gain_mean": mean, "gain_std": std,
            "pooled_gain": {"mean": gain, "ci95": [low, high], "problems": problems}}  # fmt: skip


def seed_means(runs: dict[int, dict[str, float]]) -> dict[str, float]:
    shared = set.intersection(*(set(values) for values in runs.values()))
    return {key: sum(values[key] for values in runs.values()) / len(runs) for key in shared}


def seed_runs(values: dict[str, dict[str, float]], name: str, seeds) -> dict[int, dict[str, float]]:
    """seed -> per-problem pass@1 of the evaluations "<name>_s<seed>" that have finished."""
    return {seed: values[f"{name}_s{seed}"] for seed in seeds if f"{name}_s{seed}" in values}


def seed_paired(before: dict[int, dict[str, float]], after: dict[int, dict[str, float]]) -> dict:
    """`after` minus `before` where seed k of one is seed k of the other carried on (a later step, a next stage):
    over the seeds both have, per seed and pooled (per problem the mean over seeds, bootstrapped over problems)."""
    both = sorted(set(before) & set(after))
    before, after = {k: before[k] for k in both}, {k: after[k] for k in both}
    difference, (low, high), problems = paired_difference(seed_means(before), seed_means(after))
    per_seed = {seed: paired_difference(before[seed], after[seed])[0] for seed in both}
    return {"mean": difference, "ci95": [low, high], "problems": problems, "per_seed": per_seed}


def _seed_paired_cells(d: dict, better: str, worse: str) -> str:
    """A seed_paired result as table cells: per seed | pooled [95% CI] | reading."""
    per_seed = ", ".join(f"{value:+.3f}" for value in d["per_seed"].values())
    return f"{per_seed} | {_interval(d['mean'], *d['ci95'])} | {_reading(*d['ci95'], better, worse)}"


def write_report(
    args,
    arms: dict[str, str],
    budgets: dict[int, dict],
    evaluations: dict[str, Path],
    starts: dict | None = None,
    precisions: dict[str, dict] | None = None,
) -> dict:
    """report.md and results.json in args.output_dir from the finished evaluations (an arm with a seed still
    missing is reported on the seeds it has, and says so). `arms`: report name -> label, in the table's order;
    `evaluations`: "<name>_s<seed>" -> eval.evaluate's folder, with "sft" (the cold start) and "dapo_s<seed>";
    `starts`: arm -> the arm whose model (same seed) it trained from, for the arm minus its start; `precisions`:
    "<arm>_s<seed>" -> what that GRPO run's card resolved (real_model_arms.precision_runs), for the precision table."""
    found = {name: folder for name, folder in evaluations.items() if (folder / "done").exists() or name == "sft"}
    found = {name: folder for name, folder in found.items() if any(folder.glob("*/per_problem.jsonl"))}
    values = {name: per_problem(folder, None, "pass@1")[1] for name, folder in found.items()}
    cold = values["sft"]
    labels = {"dapo": "DAPO (demo-real)", **arms}
    results = {"cold_start": sum(cold.values()) / len(cold), "seeds": list(args.seeds), "budgets": budgets, "arms": {}}
    dapo_runs = seed_runs(values, "dapo", args.seeds)
    for arm in ["dapo", *arms]:
        runs = seed_runs(values, arm, args.seeds)
        if not runs:
            continue
        entry = arm_results(cold, runs)
        if arm != "dapo" and dapo_runs:
            difference, (low, high), problems = paired_difference(seed_means(runs), seed_means(dapo_runs))
            per_seed = {seed: paired_difference(runs[seed], dapo_runs[seed])[0] for seed in runs if seed in dapo_runs}
            entry["dapo_minus_arm"] = {"mean": difference, "ci95": [low, high], "problems": problems,
                                       "per_seed": per_seed}  # fmt: skip
        results["arms"][arm] = entry

    lines = [
        "# What RL buys on SmolLM2-135M: DAPO against its alternatives from one cold start",
        "",
        f"Cold start held-out pass@1: {results['cold_start']:.3f} ({len(cold)} problems, the demo's protocol). "
        "Gains are paired on the held-out problems; pooled = per problem the mean over seeds, bootstrapped over "
        "problems.",
        "",
        "| arm | seeds | per seed: pass@1, gain [95% CI] | gain, mean ± std | pooled gain [95% CI] |",
        "|---|---:|---|---|---|",
    ]
    for arm, entry in results["arms"].items():
        per_seed = "; ".join(f"{seed}: {s['pass@1']:.3f}, {_interval(s['gain'], *s['ci95'])}"
                             for seed, s in entry["seeds"].items())  # fmt: skip
        pooled = entry["pooled_gain"]
        lines.append(f"| {labels[arm]} | {len(entry['seeds'])} | {per_seed} | {entry['gain_mean']:+.3f} ± "
                     f"{entry['gain_std']:.3f} | {_interval(pooled['mean'], *pooled['ci95'])} |")  # fmt: skip
    lines += ["", "DAPO minus each arm, pooled over seeds and paired on problems:", "",
              "| arm | per seed | pooled [95% CI] | reading |", "|---|---|---|---|"]  # fmt: skip
    for arm, entry in results["arms"].items():
        if "dapo_minus_arm" in entry:
            d = entry["dapo_minus_arm"]
            per_seed = ", ".join(f"{value:+.3f}" for value in d["per_seed"].values())
            reading = _reading(*d["ci95"], "DAPO ahead", f"{labels[arm]} ahead")
            lines.append(f"| {labels[arm]} | {per_seed} | {_interval(d['mean'], *d['ci95'])} | {reading} |")
    remedies = [
        (arm, arm.replace("remedy_long", "dapo_long")) for arm in results["arms"] if arm.startswith("remedy_long")
    ]
    remedies = [(arm, base) for arm, base in remedies if base in results["arms"]]
    if remedies:
        lines += ["", "The remedy minus DAPO trained as long, at the same step, pooled over seeds and paired on problems:",
                  "", "| at | remedy - DAPO [95% CI] | reading |", "|---|---|---|"]  # fmt: skip
        for arm, base in remedies:
            runs, bases = seed_runs(values, arm, args.seeds), seed_runs(values, base, args.seeds)
            difference, (low, high), problems = paired_difference(seed_means(bases), seed_means(runs))
            results["arms"][arm]["remedy_minus_dapo"] = {"mean": difference, "ci95": [low, high], "problems": problems}
            reading = _reading(low, high, "the remedy ahead", "the remedy behind")
            lines.append(f"| step {arm.split('@')[1]} | {_interval(difference, low, high)} | {reading} |")
    later = {}  # each longer arm's last evaluated step against its first: did it keep its gain?
    for arm in results["arms"]:
        if "@" in arm:
            later.setdefault(arm.split("@")[0], []).append(arm)
    later = {base: sorted(steps, key=lambda a: int(a.split("@")[1])) for base, steps in later.items() if len(steps) > 1}
    if later:
        lines += ["", "Each longer arm at its last step minus at its first, pooled over the seeds evaluated at both and "
                  "paired on problems:", "", "| arm | steps | per seed | pooled [95% CI] | reading |",
                  "|---|---|---|---|---|"]  # fmt: skip
        for base, steps in later.items():
            first, last = steps[0], steps[-1]
            d = seed_paired(seed_runs(values, first, args.seeds), seed_runs(values, last, args.seeds))
            results["arms"][last]["minus_first_step"] = d
            span = f"{last.split('@')[1]} - {first.split('@')[1]}"
            lines.append(f"| {base} | {span} | {_seed_paired_cells(d, 'gained since', 'lost since')} |")
    starts = {
        arm: start for arm, start in (starts or {}).items() if arm in results["arms"] and start in results["arms"]
    }
    if starts:
        lines += ["", "Each arm minus the model it trained from, seed by seed (seed k from that arm's seed k), pooled "
                  "and paired on problems:", "", "| arm | from | per seed | pooled [95% CI] | reading |",
                  "|---|---|---|---|---|"]  # fmt: skip
        for arm, start in starts.items():
            d = seed_paired(seed_runs(values, start, args.seeds), seed_runs(values, arm, args.seeds))
            results["arms"][arm]["minus_start"] = {"start": start, **d}
            lines.append(f"| {labels[arm]} | {labels[start]} | {_seed_paired_cells(d, 'gained', 'lost')} |")
    lines += precision_section(results, values, args.seeds, labels, precisions or {})
    lines += ["", "Budgets, per seed (from each DAPO run: the other arms are sized on them):", ""]
    for seed, budget in sorted(budgets.items()):
        lines.append(f"- seed {seed}: {budget['completions']} completions sampled, {budget['tokens_trained']} tokens "
                     f"trained, {budget['steps']} steps, {' '.join(budget['precision'])}")  # fmt: skip
    missing = [name for name in evaluations if name not in found]
    if missing:
        lines += ["", f"Not evaluated yet: {', '.join(missing)}."]
    text = "\n".join(lines) + "\n"
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "report.md").write_text(text)
    (args.output_dir / "results.json").write_text(json.dumps(results, indent=1, default=str))
    print(text)
    return results


PRECISION_ARMS = ("dapo_fp32", "dapo_bf16_sampling")  # DAPO as the demo runs it, in another precision


def precision_section(results: dict, values: dict, seeds, labels: dict, precisions: dict[str, dict]) -> list[str]:
    """Each precision arm minus DAPO in the configs' precision, seed by seed (seed k of both: the same data order
    and initial state, only the precision differs) and pooled; fp32 minus bf16 sampling where both ran; and each
    run's resolved precision, CPU and seconds a step. Adds results["precision"]."""
    present = [arm for arm in PRECISION_ARMS if arm in results["arms"]]
    if not present:
        return []
    dapo = seed_runs(values, "dapo", seeds)
    pairs = [(arm, "dapo") for arm in present]
    if len(present) == 2:
        pairs.append(("dapo_fp32", "dapo_bf16_sampling"))
    lines = ["", "Precision: each arm minus the other, seed by seed (seed k of both) and pooled, paired on problems:",
             "", "| arm | minus | per seed | pooled [95% CI] | reading |", "|---|---|---|---|---|"]  # fmt: skip
    results["precision"] = {"differences": {}, "runs": precisions}
    for arm, other in pairs:
        before = dapo if other == "dapo" else seed_runs(values, other, seeds)
        d = seed_paired(before, seed_runs(values, arm, seeds))
        results["precision"]["differences"][f"{arm} - {other}"] = d
        lines.append(f"| {labels[arm]} | {labels[other]} | {_seed_paired_cells(d, f'{arm} ahead', f'{other} ahead')} |")
    lines += ["", "What each run resolved and ran on (its run card):", "",
              "| run | sampling | loss pass | CPU | ISA | torch kernels | s/step |", "|---|---|---|---|---|---|---:|"]  # fmt: skip
    for name, run in sorted(precisions.items()):
        machine = run.get("machine") or {}
        step = run.get("seconds_per_step")
        lines.append(f"| {name} | {run['sampling_dtype']} | {run['loss_dtype']} | {machine.get('cpu', '?')} | "
                     f"{' '.join(machine.get('isa', [])) or '?'} | {machine.get('torch_cpu_capability', '?')} | "
                     f"{f'{step:.1f}' if step else '?'} |")  # fmt: skip
    return lines
