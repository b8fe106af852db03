"""scripts/demo_real.py's report: the table of every stage, each DAPO seed's paired gain over the cold start and,
with several seeds, the gain pooled over them; written to <output-dir>/report.md and results.json."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from demo import level_stats, plot_training  # noqa: E402  (the tiny demo's report helpers)

from eval.metrics import paired_difference  # noqa: E402

STAGES = {
    "base": "SmolLM2-135M-Instruct (base)",
    "sft": "cold-start SFT (LoRA, merged)",
    "dapo": "DAPO from the cold start",
}  # with --seeds, one DAPO stage per seed (scripts/demo_real.py: dapo_stages)


def stage_name(stage: str, seeds: dict[str, int] | None = None) -> str:
    if seeds and len(seeds) > 1 and stage in seeds:
        return f"{STAGES['dapo']}, seed {seeds[stage]}"
    return STAGES.get(stage, stage)


def unboxed_reading(samples: list[dict], per_problem: list[dict]) -> float:
    """The base model's samples read again with the verifier's "Answer: X" fallback: what it knew, unboxed."""
    from rewards.verdicts import score_completions

    gold = {problem["id"]: problem["answer"] for problem in per_problem}
    rows = [{"id": sample["id"], "answer": gold[sample["id"]], "verifier": "math"} for sample in samples]
    scores = score_completions(rows, [sample["text"] for sample in samples], math_options={"fallbacks": True})
    return sum(bool(score.correct) for score in scores) / max(len(scores), 1)


def pooled_gain(cold: dict[str, float], runs: list[dict[str, float]]) -> tuple[float, tuple[float, float], int]:
    """The gain pooled over seeds: per problem, the mean over the DAPO runs of (DAPO - cold start), then its mean
    over problems with a bootstrap interval over problems (eval.metrics.paired_difference on the per-problem means).
    The problems are the ones every run and the cold start share."""
    shared = set(cold).intersection(*runs)
    pooled = {key: sum(run[key] for run in runs) / len(runs) for key in shared}
    return paired_difference({key: cold[key] for key in shared}, pooled)


def _verdict(low: float, high: float) -> str:
    if low > 0:
        return "a gain beyond resampling noise."
    if high < 0:
        return "a loss beyond resampling noise."
    return "the interval holds 0: no difference these problems can show."


def write_report(args: argparse.Namespace, run_info: dict, results: dict[str, dict]) -> str:
    from eval.metrics import mean_std

    out = args.output_dir
    dapo_runs = run_info["dapo_stages"]
    first = results[next(iter(dapo_runs))]
    protocol = first["summary"]["protocol"]
    ks = protocol["k"]
    levels = sorted({p["difficulty"] for p in first["per_problem"]})
    header = [f"pass@{k}" for k in ks] + [f"maj@{ks[-1]}"] + [f"pass@1, level {level}" for level in levels]
    lines = ["| stage | " + " | ".join(header) + " | boxed | tokens |", "|---" * (len(header) + 3) + "|"]
    table = {}
    for stage in ("base", "sft", *dapo_runs):
        summary, per_problem = results[stage]["summary"], results[stage]["per_problem"]
        metrics = summary["metrics"]
        cells = [f"{metrics[f'pass@{k}']['mean']:.3f} [{metrics[f'pass@{k}']['ci95'][0]:.3f}, "
                 f"{metrics[f'pass@{k}']['ci95'][1]:.3f}]" for k in ks]  # fmt: skip
        cells.append(f"{metrics[f'maj@{ks[-1]}']['mean']:.3f}")
        cells += [f"{level_stats(per_problem, [level])['mean']:.3f}" for level in levels]
        boxed = sum(s["reason"] != "no boxed answer" for s in results[stage]["samples"]) / len(
            results[stage]["samples"]
        )
        cells += [f"{boxed:.0%}", f"{summary['mean_tokens']:.0f}"]
        lines.append(f"| {stage_name(stage, dapo_runs)} | " + " | ".join(cells) + " |")
        table[stage] = {"pass@1": metrics["pass@1"], "boxed": boxed}
    per_problem = {stage: {p["id"]: p["pass@1"] for p in results[stage]["per_problem"]} for stage in results}
    sft = table["sft"]["pass@1"]
    findings = []
    for stage in dapo_runs:
        gain, (low, high), paired = paired_difference(per_problem["sft"], per_problem[stage])
        table[stage]["gain"] = {"mean": gain, "ci95": [low, high], "problems": paired}
        label = "DAPO" if len(dapo_runs) == 1 else f"DAPO seed {dapo_runs[stage]}"
        findings.append(
            f"- {label}: pass@1 {table[stage]['pass@1']['mean']:.3f} against the cold start's {sft['mean']:.3f}; "
            f"paired on the same {paired} problems, DAPO minus cold start {gain:+.3f} [{low:+.3f}, {high:+.3f}] "
            "(bootstrap over the per-problem differences, which cancels the problems' own difficulty): "
            + _verdict(low, high)
        )
    if len(dapo_runs) == 1:
        stage = next(iter(dapo_runs))
        table["dapo"] = table.pop(stage)
        table["gain"] = table["dapo"].pop("gain")
        cleared = table["dapo"]["pass@1"]["ci95"][0] > sft["ci95"][1]
        findings.insert(0, (
            "- The separate intervals "
            + ("do not overlap (DAPO's lower bound is above the cold start's upper bound)." if cleared
               else "overlap: no gain that this many problems can show apart.")
        ))  # fmt: skip
        verdict = {"dapo_cleared_sft": cleared, "paired_gain_above_zero": table["gain"]["ci95"][0] > 0}
    else:
        gains = [table[stage]["gain"]["mean"] for stage in dapo_runs]
        mean, std = mean_std(gains)
        pooled, (low, high), paired = pooled_gain(per_problem["sft"], [per_problem[stage] for stage in dapo_runs])
        table["pooled_gain"] = {"mean": pooled, "ci95": [low, high], "problems": paired, "seeds": len(dapo_runs)}
        table["seed_gains"] = {"mean": mean, "std": std, "values": gains}
        passes = [table[stage]["pass@1"]["mean"] for stage in dapo_runs]
        findings.insert(0, (
            f"- Over {len(dapo_runs)} training seeds ({', '.join(map(str, dapo_runs.values()))}): "
            f"DAPO pass@1 {mean_std(passes)[0]:.3f} ± {mean_std(passes)[1]:.3f} (mean ± std over seeds), "
            f"paired gain {mean:+.3f} ± {std:.3f}. Pooled (per problem, the mean over seeds of DAPO minus the "
            f"cold start, bootstrapped over the {paired} problems): {pooled:+.3f} [{low:+.3f}, {high:+.3f}], "
            + _verdict(low, high)
        ))  # fmt: skip
        verdict = {"pooled_gain_above_zero": low > 0, "every_seed_gains": all(g > 0 for g in gains)}
    unboxed = unboxed_reading(results["base"]["samples"], results["base"]["per_problem"])
    curves = plot_training(
        {stage_name(stage, dapo_runs): run_info["models"][stage] for stage in dapo_runs}, out / "dapo_curves.png"
    )
    timings = ", ".join(f"{stage} {minutes:.1f} min" for stage, minutes in run_info["timings"].items())
    report = [
        "# The R1 story on a real model, on a CPU: SmolLM2-135M-Instruct",
        "",
        "Held-out arithmetic word problems (tasks/arithmetic.py, eval split), "
        f"{first['summary']['problems']} problems, levels {levels[0]}-{levels[-1]} (operations per "
        "problem); the cold start trained on levels 1-2, DAPO on 1-3. Brackets: 95% bootstrap intervals over "
        "problems. 'boxed': samples with a \\boxed{} answer the verifier could read.",
        "",
        *lines,
        "",
        *findings,
        f"- The base model, read with the verifier's unboxed 'Answer: X' fallback (eval.evaluate --answer-fallbacks), "
        f"is right in {unboxed:.1%} of its samples: what it lacks first is the format, which the cold start teaches.",
        f"- DAPO config: {run_info['dapo_config'].relative_to(REPO)}; wall time: {timings}.",
        "",
        "![DAPO training curves](dapo_curves.png)" if curves else "(no training curves: the run logged none)",
        "",
        "Protocol (the same for every stage):",
        "```json",
        json.dumps({key: protocol[key] for key in protocol if key not in ("model", "date")}, indent=1),
        "```",
    ]
    text = "\n".join(report) + "\n"
    (out / "report.md").write_text(text)
    (out / "results.json").write_text(json.dumps({"table": table, **verdict}, indent=1))
    return text
