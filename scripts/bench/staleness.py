"""Benchmark: does one-step off-policy generation cost accuracy? DAPO with `max_staleness` 0 against 1 on the tiny
demo, the same seeds, the same number of trained completions, evaluated alike.

    python scripts/bench/staleness.py [--seeds 0 1 2] [--staleness 0 1] [--output-dir artifacts/bench/staleness]
        [--flags "RECIPE FLAGS" --tag NAME] [--fast]

One cold start and one filtered pool (the demo's own stages, scripts/demo_stages.py, seed 0), then for each seed
and staleness the demo's DAPO stage (recipes/configs/demo/dapo.yaml, --seed k --max_staleness s) and the demo's
evaluation of it (the held-out levels 1-12, 16 problems a level, 16 samples each). Printed and written to
report.md in --output-dir: each run's pass@1 and paired gain over the cold start, each seed's paired difference
of staleness s against 0, and that difference pooled over seeds (per problem, the mean over seeds of s minus 0,
bootstrapped over problems: eval.metrics.paired_difference), with the seconds each DAPO run took. Every stage
whose output exists is skipped, so an interrupted run resumes where it stopped. `--flags` adds recipe flags to
every arm but the reference (its runs are reused), in folders and a report named by `--tag`: e.g.
`--flags "--vllm_importance_sampling_mode token_truncate" --tag token_truncate` asks whether the cost of
staleness is the correction's.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

from demo_stages import RL_POOL, Demo, evaluate_stage  # noqa: E402

from eval.metrics import paired_difference  # noqa: E402


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--staleness", type=int, nargs="+", default=[0, 1], help="the first is the reference")
    parser.add_argument("--output-dir", type=Path, default=REPO / "artifacts" / "bench" / "staleness")
    parser.add_argument(
        "--flags", default="", help="recipe flags for every arm but the reference, e.g. a correction mode to try"
    )
    parser.add_argument("--tag", default="", help="names those arms' folders and the report (with --flags)")
    parser.add_argument("--fast", action="store_true", help="a smoke run: 2 steps, tiny evaluations")
    return parser


def demo_for(args: argparse.Namespace, folder: Path, seed: int, rl_flags: list[str]) -> Demo:
    options = argparse.Namespace(
        output_dir=folder, fast=args.fast, seed=seed, force=False, eval_problems=None, eval_samples=None,
        rl_pool=RL_POOL, pool_problems=80, rl_flags=rl_flags,
    )  # fmt: skip
    return Demo(options)


def pass_at_1(result: dict) -> dict[str, float]:
    return {str(record["id"]): float(record["pass@1"]) for record in result["per_problem"]}


def _interval(mean: float, bounds: tuple[float, float]) -> str:
    return f"{mean:+.3f} [{bounds[0]:+.3f}, {bounds[1]:+.3f}]"


def main(argv: list[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    if args.flags and not args.tag:
        parser.error("--flags needs --tag: the arms it changes are kept in folders of their own")
    out = args.output_dir.resolve()  # the demo's stages write configs that recipes resolve from the repo's configs/
    shared = demo_for(args, out / "shared", 0, [])
    cold_start = shared.sft(shared.base())
    pool = shared.filter(cold_start)
    cold = pass_at_1(evaluate_stage("sft", shared.out, shared.eval_argv("sft", cold_start), False))
    runs: dict[tuple[int, int], dict] = {}  # (seed, arm): the first arm is the reference, the others take --flags
    for seed in args.seeds:
        for arm, staleness in enumerate(args.staleness):
            reference = arm == 0
            flags = ["--max_staleness", str(staleness)] + ([] if reference else args.flags.split())
            name = f"staleness{staleness}" + ("" if reference or not args.tag else f"-{args.tag}")
            demo = demo_for(args, out / name / f"seed{seed}", seed, flags)
            started = time.time()
            model = demo.rl(cold_start, pool)
            seconds = json.loads((model / "run_card.json").read_text()).get("timing", {}).get("seconds_total", {})
            result = evaluate_stage("dapo", demo.out, demo.eval_argv("dapo", model), False)
            runs[seed, arm] = {
                "pass": pass_at_1(result),
                "seconds": seconds.get("step"),
                "wall": time.time() - started,
            }
    lines = [
        f"`python scripts/bench/staleness.py --seeds {' '.join(map(str, args.seeds))} --staleness "
        f"{' '.join(map(str, args.staleness))}{' --fast' if args.fast else ''}"
        f"{f' --flags {chr(34)}{args.flags}{chr(34)} --tag {args.tag}' if args.flags else ''}`: DAPO "
        f"(recipes/configs/demo/dapo.yaml) "
        f"from one cold start, evaluated on {len(cold)} held-out problems",
        "",
        "| seed | max_staleness | pass@1 | paired gain over the cold start | s of training steps |",
        "|---|---:|---:|---:|---:|",
    ]
    label = {
        arm: f"{staleness}{f' {args.tag}' if arm and args.tag else ''}" for arm, staleness in enumerate(args.staleness)
    }
    for (seed, arm), run in runs.items():
        staleness = label[arm]
        mean, bounds, _ = paired_difference(cold, run["pass"])
        score = sum(run["pass"].values()) / len(run["pass"])
        steps = f"{run['seconds']:.0f}" if run["seconds"] else "n/a"
        lines.append(f"| {seed} | {staleness} | {score:.3f} | {_interval(mean, bounds)} | {steps} |")
    lines += ["", f"Paired difference against max_staleness {args.staleness[0]} (same seed, same problems):", ""]
    lines += ["| max_staleness | " + " | ".join(f"seed {seed}" for seed in args.seeds) + " | pooled over seeds |"]
    lines += ["|---|" + "---:|" * (len(args.seeds) + 1)]
    for arm in range(1, len(args.staleness)):
        cells = []
        for seed in args.seeds:
            mean, bounds, _ = paired_difference(runs[seed, 0]["pass"], runs[seed, arm]["pass"])
            cells.append(_interval(mean, bounds))
        per_problem = {
            index: {key: sum(runs[seed, index]["pass"][key] for seed in args.seeds) / len(args.seeds) for key in cold}
            for index in (0, arm)
        }
        mean, bounds, _ = paired_difference(per_problem[0], per_problem[arm])
        lines.append(f"| {label[arm]} | " + " | ".join(cells) + f" | {_interval(mean, bounds)} |")
    report = "\n".join(lines)
    print(report)
    (out / (f"report-{args.tag}.md" if args.tag else "report.md")).write_text(report + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
