"""`scripts/demo.py --seeds 0 1 2`: the demo once per training seed, then one report that gives every figure of
the demo's table as mean ± std across seeds, each seed's own bootstrap interval beside it, and what the runs ran on.

Why: one run of the demo is one draw, and the draws are far apart. The tiny model's training is chaotic
(the lookup skill appears in a sudden drop of the SFT loss), so anything that moves a bit early moves the
end result: with the same code, data and library versions, forcing torch's AVX2 kernels instead of AVX-512
changes the SFT weights within 40 steps (issue 18's investigation). A figure of this demo means something only
with its spread across seeds, and beside the machine and versions it was measured with.

Seed k runs the one-seed demo with `--seed k` into `<output-dir>/seed<k>/` (its own report there); the seed
sets the tiny model's initialisation, every recipe's training seed and the sampling of the filter and the
evaluation. The data are not the seed's: the SFT set, the RL pool and the held-out problems (the eval split,
the same rows for every seed) come from fixed dataset seeds. A seed whose report exists is skipped, so an
interrupted run resumes where it stopped (`--force` redoes every seed).
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from demo_stages import EVAL_LEVELS, STAGE_NAMES  # noqa: E402

from eval.metrics import mean_std  # noqa: E402  (eval's spread over seeds: mean and sample std)

logger = logging.getLogger("demo")

VERSION_PACKAGES = ("python", "torch", "transformers", "trl", "peft", "accelerate", "datasets", "math-verify")
REPORT_NAME = "seeds_report"  # beside the seed folders: never the one-seed report.md of the same output dir


def seed_dir(output_dir: Path, seed: int) -> Path:
    return Path(output_dir) / f"seed{seed}"


def environment() -> dict:
    """What a run ran on: library versions, the git commit (and whether the tree had changes), the CPU kernels
    torch dispatches to and its thread count. Issue 18 found the kernels enough to change the results."""
    import platform

    import torch

    from recipes.common.run_card import git_commit, package_versions

    versions = package_versions()
    try:
        status = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True, timeout=5, cwd=REPO)
        dirty = bool(status.stdout.strip()) if status.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        dirty = None
    return {
        "versions": {name: versions[name] for name in VERSION_PACKAGES if name in versions},
        "git_commit": git_commit(),
        "git_dirty": dirty,
        "cpu": platform.processor() or platform.machine(),
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch_threads": torch.get_num_threads(),
    }


def run_seeds(args: argparse.Namespace, run_one) -> dict:
    """Run `run_one(seed_args)` for each seed still missing its report, then write the report over all seeds."""
    out = Path(args.output_dir)
    for seed in args.seeds:
        folder = seed_dir(out, seed)
        if (folder / "report.json").is_file() and not args.force:
            logger.info("[seed %d] %s exists: skipped", seed, folder / "report.json")
            continue
        logger.info("[seed %d] running the demo into %s", seed, folder)
        run_one(argparse.Namespace(**{**vars(args), "seed": seed, "seeds": None, "output_dir": folder}))
        (folder / "environment.json").write_text(json.dumps(environment(), indent=2))
    reports = {seed: json.loads((seed_dir(out, seed) / "report.json").read_text()) for seed in args.seeds}
    environments = {}
    for seed in args.seeds:
        path = seed_dir(out, seed) / "environment.json"
        environments[seed] = json.loads(path.read_text()) if path.is_file() else None
    aggregate = aggregate_seeds(reports)
    aggregate["environments"] = {str(seed): env for seed, env in environments.items()}
    text = format_seeds_report(aggregate, reports, environments)
    (out / f"{REPORT_NAME}.md").write_text(text)
    (out / f"{REPORT_NAME}.json").write_text(json.dumps(aggregate, indent=2))
    print("\n" + text + f"\nreport: {out / (REPORT_NAME + '.md')}")
    return aggregate


def figures_of(row: dict) -> list[str]:
    """The table's figures with a bootstrap interval, in the report's order: pass@1 (1-4), pass@1 (5-12),
    pass@n (5-12), maj@n (5-12)."""
    return [key for key, value in row.items() if isinstance(value, dict) and "ci95" in value]


def _spread(values: list[float]) -> dict:
    mean, std = mean_std(values)
    return {"mean": mean, "std": std, "values": values}


def aggregate_seeds(reports: dict[int, dict]) -> dict:
    """Every figure of each stage's row, over the seeds: mean, sample std and each seed's value with its interval.

    `reports` maps a seed to its report.json ({"stages": {stage: row}} as demo_report.summarize_stages writes
    it). A stage enters only if every seed ran it; the others are listed under "left_out".
    """
    seeds = list(reports)
    tables = {seed: reports[seed]["stages"] for seed in seeds}
    first = tables[seeds[0]]
    stages = [stage for stage in first if all(stage in tables[seed] for seed in seeds)]
    left_out = sorted({stage for table in tables.values() for stage in table} - set(stages))
    result: dict = {"seeds": seeds, "stages": {}, "left_out": left_out}
    for stage in stages:
        rows = {seed: tables[seed][stage] for seed in seeds}
        entry: dict = {}
        for figure in figures_of(rows[seeds[0]]):
            entry[figure] = _spread([rows[seed][figure]["mean"] for seed in seeds])
            entry[figure]["by_seed"] = {
                str(seed): {"mean": rows[seed][figure]["mean"], "ci95": rows[seed][figure]["ci95"]} for seed in seeds
            }
        entry["stop_rate"] = _spread([rows[seed]["stop_rate"] for seed in seeds])
        entry["by_level"] = {
            str(level): _spread([rows[seed]["by_level"][str(level)] for seed in seeds]) for level in EVAL_LEVELS
        }
        result["stages"][stage] = entry
    result["gains"] = seed_gains(tables, seeds, stages)
    filters = [reports[seed].get("filter") for seed in seeds]
    if all(filters):
        result["filter"] = {
            "rows_in": _spread([f["rows_in"] for f in filters]),
            "rows_out": _spread([f["rows_out"] for f in filters]),
        }
    return result


def _separated(x: dict, y: dict) -> bool:
    return y["ci95"][0] > x["ci95"][1] or y["ci95"][1] < x["ci95"][0]


GAINS = [  # (name, from stage, to stage, figure): the comparisons the one-seed report's verdicts make
    ("cold start over base, pass@1 (1-4)", "base", "sft", "pass@1 (1-4)"),
    ("DAPO over cold start, pass@1 (5-12)", "sft", "dapo", "pass@1 (5-12)"),
    ("random-reward control over cold start, pass@1 (5-12)", "sft", "dapo_random", "pass@1 (5-12)"),
    ("rejection sampling over DAPO, pass@1 (5-12)", "dapo", "rs", "pass@1 (5-12)"),
    ("distilled student over its teacher, pass@1 (5-12)", "dapo", "distill", "pass@1 (5-12)"),
]


def seed_gains(tables: dict, seeds: list[int], stages: list[str]) -> dict:
    """Each comparison as a gain per seed, its mean ± std, and in how many seeds the two intervals are apart."""
    gains = {}
    for name, a, b, figure in GAINS:
        if a not in stages or b not in stages:
            continue
        pairs = [(tables[seed][a][figure], tables[seed][b][figure]) for seed in seeds]
        gains[name] = {
            **_spread([y["mean"] - x["mean"] for x, y in pairs]),
            "seeds_apart": sum(_separated(x, y) for x, y in pairs),
        }
    return gains


def _pm(spread: dict) -> str:
    return f"{spread['mean']:.3f} ± {spread['std']:.3f}"


def format_seeds_report(aggregate: dict, reports: dict[int, dict], environments: dict[int, dict | None]) -> str:
    seeds = aggregate["seeds"]
    stages = aggregate["stages"]
    figures = figures_of(next(iter(reports.values()))["stages"][next(iter(stages))]) if stages else []
    headers = [_header(figure) for figure in figures]
    lines = [f"# rlvr-recipes demo over {len(seeds)} seeds ({', '.join(map(str, seeds))})", ""]
    lines += [
        "Every seed is evaluated on the same held-out problems (the synthetic task's eval split) with the same "
        "protocol (see each seed's report.md). A seed sets the tiny model's initialisation, each recipe's training "
        "seed and the sampling of the filter and the evaluation. Cells: mean ± sample std across seeds; below, each "
        "seed's value with its 95% bootstrap interval over problems.",
        "",
        "| stage | " + " | ".join(headers) + " | stops at EOS |",
        "|---|" + "---:|" * (len(figures) + 1),
    ]
    for stage, entry in stages.items():
        cells = [_pm(entry[figure]) for figure in figures] + [_pm(entry["stop_rate"])]
        lines.append(f"| {STAGE_NAMES.get(stage, stage)} | " + " | ".join(cells) + " |")
    lines += ["", "Each seed, with its 95% bootstrap interval:", ""]
    lines += ["| stage | seed | " + " | ".join(headers) + " |", "|---|---:|" + "---:|" * len(figures)]
    for stage, entry in stages.items():
        for seed in seeds:
            cells = []
            for figure in figures:
                value = entry[figure]["by_seed"][str(seed)]
                cells.append(f"{value['mean']:.3f} [{value['ci95'][0]:.3f}, {value['ci95'][1]:.3f}]")
            lines.append(f"| {STAGE_NAMES.get(stage, stage)} | {seed} | " + " | ".join(cells) + " |")
    lines += ["", "pass@1 per level, mean ± std across seeds:", ""]
    lines += ["| level | " + " | ".join(stages) + " |", "|---:|" + "---:|" * len(stages)]
    for level in EVAL_LEVELS:
        lines.append(f"| {level} | " + " | ".join(_pm(stages[s]["by_level"][str(level)]) for s in stages) + " |")
    lines += ["", *gain_lines(aggregate, len(seeds))]
    if "filter" in aggregate:
        kept, pool = aggregate["filter"]["rows_out"], aggregate["filter"]["rows_in"]
        per_seed = ", ".join(f"{value:.0f}" for value in kept["values"])
        lines.append(
            f"- The filter kept {kept['mean']:.1f} ± {kept['std']:.1f} of {pool['mean']:.0f} problems ({per_seed})."
        )
    if aggregate["left_out"]:
        lines.append(f"- Left out (not run in every seed): {', '.join(aggregate['left_out'])}.")
    lines += ["", *environment_lines(environments), ""]
    return "\n".join(lines)


def _header(figure: str) -> str:
    metric, _, levels = figure.partition(" (")
    levels = levels.rstrip(")")
    return f"{metric}, levels {levels}" if metric == "pass@1" else f"{metric}, {levels}"


def gain_lines(aggregate: dict, num_seeds: int) -> list[str]:
    lines = []
    for name, gain in aggregate["gains"].items():
        per_seed = ", ".join(f"{value:+.3f}" for value in gain["values"])
        lines.append(
            f"- {name[0].upper() + name[1:]}: {gain['mean']:+.3f} ± {gain['std']:.3f} across seeds ({per_seed}); "
            f"intervals apart in {gain['seeds_apart']} of {num_seeds} seeds."
        )
    return lines


def environment_lines(environments: dict[int, dict | None]) -> list[str]:
    """The versions, commit and CPU kernels of the runs; every seed's when they differ."""
    known = {seed: env for seed, env in environments.items() if env}
    if not known:
        return ["Ran on: not recorded (the seed folders hold no environment.json)."]
    distinct = {json.dumps(env, sort_keys=True) for env in known.values()}
    lines = []
    for seed, env in known.items() if len(distinct) > 1 else [(None, next(iter(known.values())))]:
        versions = ", ".join(f"{name} {version}" for name, version in env["versions"].items())
        commit = (env.get("git_commit") or "unknown")[:12] + (
            " (with uncommitted changes)" if env.get("git_dirty") else ""
        )
        where = f"seed {seed}" if seed is not None else f"all {len(known)} seeds"
        lines.append(
            f"Ran on ({where}): commit {commit}; {versions}; CPU {env.get('cpu')}, torch kernels "
            f"{env.get('torch_cpu_capability')}, {env.get('torch_threads')} torch thread(s)."
        )
    if len(distinct) > 1:
        lines.append("The seeds ran on different environments: their spread mixes seeds and machines.")
    missing = sorted(set(environments) - set(known))
    if missing:
        lines.append(f"Not recorded for seed(s) {', '.join(map(str, missing))}.")
    return lines
