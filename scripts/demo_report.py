"""The demo's report (scripts/demo.py): the per-level table, the verdicts, the training curves and the notes on
each stage, read from the files the stages write (eval summaries, per_problem.jsonl, metrics.jsonl, the
recipes' stats and summary files).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


logger = logging.getLogger("demo")

from demo_stages import EVAL_LEVELS, HARD_LEVELS, STAGE_NAMES, TRAINED_LEVELS, Demo  # noqa: E402


def level_stats(per_problem: list[dict], levels: list[int], metric: str = "pass@1") -> dict:
    from eval.metrics import bootstrap_ci

    values = [p[metric] for p in per_problem if p["scored"] and p["difficulty"] in levels]
    if not values:
        return {"mean": float("nan"), "ci95": [float("nan"), float("nan")], "problems": 0}
    low, high = bootstrap_ci(values)
    return {"mean": sum(values) / len(values), "ci95": [low, high], "problems": len(values)}


def stop_rate(evaluation: dict) -> float:
    return 1.0 - evaluation["summary"]["truncation_rate"]


def summarize_stages(results: dict[str, dict], k_max: int) -> dict:
    table = {}
    for stage, evaluation in results.items():
        per_problem = evaluation["per_problem"]
        table[stage] = {
            "pass@1 (1-4)": level_stats(per_problem, TRAINED_LEVELS),
            "pass@1 (5-12)": level_stats(per_problem, HARD_LEVELS),
            f"pass@{k_max} (5-12)": level_stats(per_problem, HARD_LEVELS, f"pass@{k_max}"),
            f"maj@{k_max} (5-12)": level_stats(per_problem, HARD_LEVELS, f"maj@{k_max}"),
            "by_level": {level: level_stats(per_problem, [level])["mean"] for level in EVAL_LEVELS},
            "stop_rate": stop_rate(evaluation),
            "mean_tokens": evaluation["summary"]["mean_tokens"],
        }
    return table


def _cell(stat: dict) -> str:
    low, high = stat["ci95"]
    return f"{stat['mean']:.3f} [{low:.3f}, {high:.3f}]"


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.open()] if path.is_file() else []


def plot_training(runs: dict[str, Path], path: Path) -> Path | None:
    """Reward, mean within-group reward std, zero-std group fraction and entropy per step of the RL runs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        ("reward", "mean reward"),
        ("groups/std_mean", "mean within-group reward std"),
        ("groups/zero_std_frac", "zero-std group fraction"),
        ("entropy", "token entropy"),
    ]
    curves = {name: _read_jsonl(folder / "metrics.jsonl") for name, folder in runs.items()}
    if not any(curves.values()):
        return None
    figure, axes = plt.subplots(1, len(panels), figsize=(4.0 * len(panels), 3.2))
    for axis, (key, title) in zip(axes, panels, strict=True):
        for name, records in curves.items():
            points = [(r["step"], r[key]) for r in records if key in r]
            if points:
                axis.plot(*zip(*points, strict=True), marker=".", label=STAGE_NAMES.get(name, name))
        axis.set_title(title, fontsize=10)
        axis.set_xlabel("step")
        axis.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def write_report(demo: Demo, run: dict, wall_minutes: float, threads: int) -> str:
    from eval.report import plot_pass_at_k

    results = run["results"]
    k_max = demo.eval_samples
    ks = [2**i for i in range(k_max.bit_length()) if 2**i <= k_max]
    table = summarize_stages(results, k_max)
    out = demo.out
    labels = {STAGE_NAMES.get(stage, stage): evaluation["summary"] for stage, evaluation in results.items()}
    plot_pass_at_k(labels, ks, out / "pass_at_k.png", "held-out synthetic levels 1-12, all stages")
    rl_runs = {name: Path(run["models"][name]) for name in ("dapo", "dapo_random") if name in run["models"]}
    curves = plot_training(rl_runs, out / "grpo_curves.png")

    lines = ["# rlvr-recipes demo: the R1 pipeline in miniature", ""]
    lines += [
        f"Held-out problems of the synthetic task (eval split): {demo.eval_problems} per level, levels 1-12, "
        f"{k_max} samples each at temperature 1.0, up to {16 if demo.fast else 96} new tokens, seed {demo.seed}. "
        "pass@k is the unbiased estimator, maj@k votes over answers grouped by the verifier; brackets are 95% "
        "bootstrap intervals over problems. Levels 1-4 are those of the cold start; 5-12 were never in SFT data.",
        "",
        f"| stage | pass@1, levels 1-4 | pass@1, levels 5-12 | pass@{k_max}, 5-12 | maj@{k_max}, 5-12 | stops at EOS |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for stage, row in table.items():
        lines.append(
            f"| {STAGE_NAMES.get(stage, stage)} | {_cell(row['pass@1 (1-4)'])} | {_cell(row['pass@1 (5-12)'])} | "
            f"{_cell(row[f'pass@{k_max} (5-12)'])} | {row[f'maj@{k_max} (5-12)']['mean']:.3f} | "
            f"{row['stop_rate']:.0%} |"
        )
    lines += ["", "pass@1 per level:", ""]
    stages = list(table)
    lines += ["| level | " + " | ".join(stages) + " |", "|---:|" + "---:|" * len(stages)]
    for level in EVAL_LEVELS:
        lines.append(f"| {level} | " + " | ".join(f"{table[s]['by_level'][level]:.3f}" for s in stages) + " |")
    lines += ["", *verdicts(table), ""]
    lines += ["![pass@k of every stage](pass_at_k.png)", ""]
    if curves:
        lines += ["![GRPO training curves](grpo_curves.png)", ""]
    lines += budget_section(demo, run)
    lines += stage_notes(demo, run)
    lines += ["", "Wall time per stage (s): " + ", ".join(f"{k} {v:.0f}" for k, v in demo.timings.items())]
    lines += [f"Total: {wall_minutes:.1f} min, {demo.args.jobs} process(es) at once, {threads} thread(s) in all.", ""]
    text = "\n".join(lines)
    (out / "report.md").write_text(text)
    record = {"seed": demo.seed, "stages": table, "timings": demo.timings, "filter": filter_counts(run["pool"])}
    (out / "report.json").write_text(json.dumps(record, indent=2))
    return text


def budget_section(demo: Demo, run: dict) -> list[str]:
    """Accuracy against thinking budget of the cold start and DAPO models (eval/budget.py: s1's forcing). The
    task's chains grow with the level (about 3 tokens a hop), so a budget cuts the hard levels first."""
    from eval import evaluate
    from eval.budget import format_curve_table, plot_budget_curves

    budgets = [4, 16] if demo.fast else [4, 8, 16, 32, 64]
    curves = {}
    for stage in [stage for stage in ("sft", "dapo") if stage in run["models"]]:
        out = demo.out / "eval_budget" / stage
        saved = out / "budget_curve" / f"synthetic_{EVAL_LEVELS[0]}-{EVAL_LEVELS[-1]}.json"
        if demo.args.force or not saved.exists():
            argv = demo.eval_argv(stage, run["models"][stage])[:-2] + ["--output-dir", str(out), "--overwrite"]
            evaluate.main([*argv, "--budgets", *map(str, budgets)])
        curves[STAGE_NAMES.get(stage, stage)] = json.loads(saved.read_text())
    if not curves:
        return []
    ks = [1, demo.eval_samples]
    plot_budget_curves(curves, ks, demo.out / "budget_curve.png", "held-out levels 1-12: accuracy vs thinking budget")
    return [
        "## Thinking budget",
        "",
        "The same held-out problems with thinking cut at each budget: a sample still thinking there gets `</think>` "
        "and `\\boxed{` appended and 16 tokens to answer (s1's budget forcing). forced: samples cut at the budget.",
        "",
        format_curve_table(curves, ks, "model"),
        "",
        "![accuracy against thinking budget](budget_curve.png)",
        "",
    ]


def verdicts(table: dict) -> list[str]:
    """Plain sentences: did each stage beat the one before it, and is the RL gain outside the noise?"""
    lines = []

    def gain(a: str, b: str, key: str) -> str:
        x, y = table[a][key], table[b][key]
        separated = y["ci95"][0] > x["ci95"][1] or y["ci95"][1] < x["ci95"][0]
        return f"{y['mean'] - x['mean']:+.3f} ({'intervals do not overlap' if separated else 'intervals overlap'})"

    if "sft" in table:
        lines.append(f"- Cold start over base, pass@1 on levels 1-4: {gain('base', 'sft', 'pass@1 (1-4)')}.")
    if "dapo" in table:
        lines.append(f"- DAPO over cold start, pass@1 on levels 5-12: {gain('sft', 'dapo', 'pass@1 (5-12)')}.")
    if "dapo_random" in table:
        lines.append(
            f"- Random-reward control over cold start, levels 5-12: {gain('sft', 'dapo_random', 'pass@1 (5-12)')}; "
            "the gap between the two RL rows is what the verifier's reward explains."
        )
    if "rs" in table and "dapo" in table:
        lines.append(f"- Rejection sampling over DAPO, levels 5-12: {gain('dapo', 'rs', 'pass@1 (5-12)')}.")
    if "distill" in table and "dapo" in table:
        lines.append(
            f"- Distilled student against its teacher (the DAPO model), levels 5-12: {gain('dapo', 'distill', 'pass@1 (5-12)')}."
        )
    return lines


def filter_counts(pool: Path) -> dict | None:
    """Problems into the filter pipeline and kept by it (its report file), for the report over seeds."""
    report = pool.parent / f"{pool.name}.report.json"
    steps = json.loads(report.read_text()).get("steps") if report.is_file() else None
    return {"rows_in": steps[0]["rows_in"], "rows_out": steps[-1]["rows_out"]} if steps else None


def stage_notes(demo: Demo, run: dict) -> list[str]:
    """What each training stage did, from the files the recipes wrote."""
    lines = ["## Stages", ""]
    report = run["pool"].parent / f"{run['pool'].name}.report.json"
    if report.is_file():
        data = json.loads(report.read_text())
        steps = ", ".join(f"{s['step']} {s['rows_in']} -> {s['rows_out']}" for s in data.get("steps", []))
        lines.append(f"- filter ({demo.args.rl_pool}, cold-start model's pass rate): {steps}.")
    for name in ("dapo", "dapo_random"):
        folder = run["models"].get(name)
        if folder is None:
            continue
        records = _read_jsonl(Path(folder) / "metrics.jsonl")
        card = json.loads((Path(folder) / "run_card.json").read_text())
        warnings = sorted({warning["kind"] for warning in card.get("monitor_warnings") or []})
        text = f"- {name}: {card.get('final_step')} steps"
        logged = [r for r in records if "dynamic_sampling/groups_generated" in r]
        if logged:  # each log averages its window of steps; so does this
            generated = sum(r["dynamic_sampling/groups_generated"] for r in logged) / len(logged)
            kept = sum(r["dynamic_sampling/groups_kept_with_variance"] for r in logged) / len(logged)
            rounds = sum(r["dynamic_sampling/extra_rounds"] for r in logged) / len(logged)
            text += (
                f"; dynamic sampling generated {generated:.1f} groups per step on average, {kept:.1f} of them with "
                f"reward variance, in {rounds:.2f} extra generation rounds"
            )
        lines.append(text + f"; monitor warnings: {', '.join(warnings) or 'none'}.")
    summary = demo.out / "rs" / "summary.json"
    if "rs" in run["models"] and summary.is_file():
        card = json.loads((demo.out / "rs" / "run_card.json").read_text())
        keep = card["config"]["script"]["max_per_problem"]
        for stats in json.loads(summary.read_text())["rounds"]:
            lines.append(
                f"- rs, round {stats['round']}: {stats['samples_drawn']} samples for {stats['problems']} problems, "
                f"{stats['samples_correct']} verified correct, {stats['samples_kept']} kept (distinct, at most "
                f"{keep} per problem); "
                f"{stats['problems_solved']} problems solved at least once."
            )
    stats_path = demo.out / "distill" / "distill_stats.json"
    if "distill" in run["models"] and stats_path.is_file():
        stats = json.loads(stats_path.read_text())
        offline = stats.get("offline") or {}
        lines.append(
            f"- distill: the DAPO model wrote {offline.get('traces_drawn')} traces, {offline.get('traces_kept')} "
            f"verified and kept; the student ({student_size(stats)}), cut from the teacher, was fine-tuned on them."
        )
    return lines


def student_size(stats: dict) -> str:
    from transformers import AutoConfig

    try:
        student = AutoConfig.from_pretrained(stats["final_student"])
        teacher = AutoConfig.from_pretrained(stats["teacher"])
    except (OSError, KeyError):
        return "a smaller model"
    return (
        f"hidden {student.hidden_size}, MLP {student.intermediate_size}, {student.num_hidden_layers} layers; the "
        f"teacher: hidden {teacher.hidden_size}, MLP {teacher.intermediate_size}, {teacher.num_hidden_layers} layers"
    )
