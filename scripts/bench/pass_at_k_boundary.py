"""Benchmark: the pass@k boundary of the cold start and its RL model. Does RL raise pass@1 but lower pass@k at large k?

    python scripts/bench/pass_at_k_boundary.py            # the demo's models: artifacts/demo/sft and artifacts/demo/dapo
    python scripts/bench/pass_at_k_boundary.py --cold-start DIR --rl DIR --problems-per-level 4 --n 64

Yue et al. (2025, "Does Reinforcement Learning Really Incentivize Reasoning Capacity in LLMs Beyond the Base
Model?") found that RL with verifiable rewards raises pass@1 while the base model overtakes it at large k: RL
sharpens the sampling towards answers the base already reaches, and narrows what it reaches. This runs their
measurement on the embedded task: both models evaluated alike by eval.evaluate (n samples per held-out problem
of levels 5-12, the synthetic task's eval split, at temperature 1; pass@k by the unbiased estimator with
bootstrap intervals over problems), compared by eval.compare (which finds the crossover k), and drawn as
pass@k for k = 1..n on a log axis with the bootstrap bands.

On a real model: `--dataset arithmetic:1-3 --max-new-tokens 128 --also base DIR --also RFT DIR` draws the base
model and another arm beside the cold start and the RL model, each compared with the cold start (tables and
crossovers); SmolLM2's command is in docs/demo-real.md.

Written (a rerun resumes the evaluations; --overwrite starts them afresh):
  <output-dir>/cold_start/, <output-dir>/rl/     eval.evaluate's runs (summary.json, per_problem.jsonl, samples)
  <output-dir>/compare/compare.md               eval.compare's report (per-k table, problems only one run solves)
  --plot  (default docs/img/pass_at_k_boundary.png) and --table (default <output-dir>/pass_at_k_boundary.md)

Cost: n x problems sequences of up to 96 tokens per model, then maj@k over them (eval.evaluate writes it for
every k). The default, 8 problems per level (64 problems) and n = 256, is 16,384 sequences per model: measured
7.1 minutes from nothing on one thread of a 2-core machine shared with other jobs (cold start 4.8, DAPO 2.0: its
answers are shorter), so the whole run stays under 15 minutes on one core.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

logger = logging.getLogger("bench.pass_at_k_boundary")

DEMO = REPO / "artifacts" / "demo"
TABLE_KS = (1, 4, 16, 64, 256)
MAX_NEW_TOKENS = 96  # the demo's evaluation and training length


def curve_ks(n: int) -> list[int]:
    """k on a log grid from 1 to n: powers of two and the halfway points 3 * 2^i, and n itself."""
    ks = {1, n}
    power = 1
    while power <= n:
        ks.update(k for k in (power, 3 * power // 2) if k <= n)
        power *= 2
    return sorted(ks)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cold-start", type=Path, default=DEMO / "sft", help="the model before RL (default: demo's)")
    parser.add_argument("--rl", type=Path, default=DEMO / "dapo", help="the model after RL (default: the demo's DAPO)")
    parser.add_argument("--labels", nargs=2, default=["cold start (SFT)", "DAPO"], help="names in the plot and table")
    parser.add_argument(
        "--also", nargs=2, action="append", default=[], metavar=("LABEL", "DIR"),
        help="one more model, drawn beside the two and compared with the cold start like the RL model (repeatable: "
        "the base model, another arm)",
    )  # fmt: skip
    parser.add_argument("--dataset", default=None, help="the held-out problems (default: synthetic:<levels>)")
    parser.add_argument("--max-new-tokens", type=int, default=MAX_NEW_TOKENS, help="as the models were trained")
    parser.add_argument("--levels", default="5-12", help="synthetic task levels (default 5-12, never in SFT data)")
    parser.add_argument("--problems-per-level", type=int, default=8, help="held-out problems per level (default 8)")
    parser.add_argument("--n", type=int, default=256, help="samples per problem (the largest k)")
    parser.add_argument("--seed", type=int, default=0, help="the evaluation's sampling seed")
    parser.add_argument("--batch-size", type=int, default=256, help="sequences per generate call")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1: one core)")
    parser.add_argument("--output-dir", type=Path, default=REPO / "artifacts" / "bench" / "pass_at_k_boundary")
    parser.add_argument("--plot", type=Path, default=REPO / "docs" / "img" / "pass_at_k_boundary.png")
    parser.add_argument("--table", type=Path, default=None, help="default: <output-dir>/pass_at_k_boundary.md")
    parser.add_argument("--overwrite", action="store_true", help="discard finished evaluations instead of resuming")
    return parser.parse_args(argv)


def dataset(args: argparse.Namespace) -> str:
    return args.dataset or f"synthetic:{args.levels}"


def evaluate_model(model: Path, folder: Path, args: argparse.Namespace) -> tuple[dict, float]:
    """eval.evaluate on the held-out levels, resumed when `folder` holds part of the same run; (summary, seconds)."""
    from eval import evaluate

    if not (model / "config.json").is_file():
        raise SystemExit(f"{model} holds no model (no config.json): run `make demo` first, or pass --cold-start/--rl")
    argv = ["--model", str(model), "--dataset", dataset(args), "--num-rows", str(args.problems_per_level)]
    argv += ["--n", str(args.n), "--k", *map(str, curve_ks(args.n)), "--temperature", "1.0", "--top-p", "1.0"]
    argv += ["--max-new-tokens", str(args.max_new_tokens), "--backend", "transformers"]
    argv += ["--batch-size", str(args.batch_size)]
    argv += ["--seeds", str(args.seed), "--output-dir", str(folder)] + (["--overwrite"] if args.overwrite else [])
    started = time.time()
    evaluate.main(argv)
    seconds = time.time() - started
    (summary_path,) = folder.glob("*/summary.json")
    return json.loads(summary_path.read_text()), seconds


def plot_boundary(summaries: dict[str, dict], ks: list[int], cross: float | None, path: Path, title: str) -> Path:
    """pass@k against k (log axis), a 95% bootstrap band per model, the crossover marked when there is one."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6.0, 4.0))
    for label, summary in summaries.items():
        metric = [summary["metrics"][f"pass@{k}"] for k in ks]
        axis.plot(ks, [m["mean"] for m in metric], marker=".", label=label)
        axis.fill_between(ks, [m["ci95"][0] for m in metric], [m["ci95"][1] for m in metric], alpha=0.2)
    if cross is not None:
        axis.axvline(cross, color="grey", linestyle="--", linewidth=1)
        axis.text(cross, 0.03, f" curves cross, k = {cross:.0f}", color="grey", fontsize=8)
    axis.set_xscale("log", base=2)
    axis.set_xticks([k for k in ks if k & (k - 1) == 0], labels=[str(k) for k in ks if k & (k - 1) == 0])
    axis.set_xlabel("k (samples per problem)")
    axis.set_ylabel("pass@k")
    axis.set_ylim(0, 1)
    axis.set_title(title, fontsize=10)
    axis.grid(alpha=0.3)
    axis.legend(loc="lower right")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def paired_differences(problems_a: dict, problems_b: dict, ks: list[int]) -> dict[int, tuple[float, list[float]]]:
    """k -> (mean, 95% bootstrap interval) of the per-problem difference b - a in pass@k, over the problems both
    runs scored. Both models answer the same problems, so the paired interval is the one that says whether
    they differ: the two models' own intervals mostly reflect how hard the problems are."""
    from eval.metrics import bootstrap_ci

    shared = sorted(
        pid for pid in set(problems_a) & set(problems_b) if problems_a[pid]["scored"] and problems_b[pid]["scored"]
    )
    paired = {}
    for k in ks:
        differences = [problems_b[pid][f"pass@{k}"] - problems_a[pid][f"pass@{k}"] for pid in shared]
        paired[k] = (sum(differences) / len(differences), list(bootstrap_ci(differences)))
    return paired


def boundary_table(summaries: dict[str, dict], ks: list[int], cross: float | None, paired: dict | None = None) -> str:
    """pass@k at TABLE_KS (those measured) for both models with their intervals, and the difference with its
    paired interval when `paired` (paired_differences) is given."""
    (name_a, a), (name_b, b) = summaries.items()
    lines = [f"| k | {name_a} | {name_b} | difference |", "|---:|---:|---:|---:|"]
    for k in [k for k in TABLE_KS if k in ks]:
        x, y = a["metrics"][f"pass@{k}"], b["metrics"][f"pass@{k}"]
        if paired is not None:
            mean, (low, high) = paired[k]
            difference = f"{mean:+.3f} [{low:+.3f}, {high:+.3f}]"
        else:
            apart = y["ci95"][0] > x["ci95"][1] or y["ci95"][1] < x["ci95"][0]
            difference = f"{y['mean'] - x['mean']:+.3f}{'' if apart else ' (intervals overlap)'}"
        lines.append(
            f"| {k} | {x['mean']:.3f} [{x['ci95'][0]:.3f}, {x['ci95'][1]:.3f}] | "
            f"{y['mean']:.3f} [{y['ci95'][0]:.3f}, {y['ci95'][1]:.3f}] | {difference} |"
        )
    lines.append("")
    if cross is None:
        from eval.compare import no_crossover

        curve_a, curve_b = ([run["metrics"][f"pass@{k}"]["mean"] for k in ks] for run in (a, b))
        lines.append(no_crossover(ks, curve_a, curve_b, name_a, name_b) + " (eval.compare)")
    else:
        lines.append(f"Crossover: the curves cross near k = {cross:.1f} (eval.compare, interpolated on log k).")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    import torch

    from eval.compare import common_ks, compare, crossover, load_run

    torch.set_num_threads(args.threads)
    out = args.output_dir
    out.mkdir(parents=True, exist_ok=True)
    runs = {"cold_start": args.cold_start, "rl": args.rl} | {f"also_{i}": Path(d) for i, (_, d) in enumerate(args.also)}
    labels = [*args.labels, *(label for label, _ in args.also)]
    summaries, seconds = {}, {}
    for (name, model), label in zip(runs.items(), labels, strict=True):
        logger.info("evaluating %s (%s): n=%d on %s", label, model, args.n, dataset(args))
        summaries[label], seconds[label] = evaluate_model(model, out / name, args)
    (reference,) = load_run(out / "cold_start").values()
    cold = summaries[labels[0]]
    tables, paired, crossings, compare_report = [], {}, {}, None
    for (name, _), label in list(zip(runs.items(), labels, strict=True))[1:]:  # each against the cold start
        report = compare(out / "cold_start", out / name, out / ("compare" if name == "rl" else f"compare_{name}"))
        compare_report = compare_report or report
        other = summaries[label]
        ks = common_ks(cold, other)
        crossings[label] = crossover(
            ks, [cold["metrics"][f"pass@{k}"]["mean"] for k in ks], [other["metrics"][f"pass@{k}"]["mean"] for k in ks]
        )
        (run,) = load_run(out / name).values()
        paired[label] = paired_differences(reference["problems"], run["problems"], ks)
        tables += [boundary_table({labels[0]: cold, label: other}, ks, crossings[label], paired[label]), ""]
    ks = common_ks(cold, summaries[labels[1]])  # one protocol: every model has the same k
    problems = cold["problems"]
    title = f"held-out {dataset(args)}: {problems} problems, n = {args.n}"
    cross = crossings[labels[1]]
    plot_boundary(summaries, ks, cross if len(summaries) == 2 else None, args.plot, title)
    timing = ", ".join(f"{label} {value / 60:.1f} min" for label, value in seconds.items())
    text = "\n".join([
        f"# pass@k boundary: {' vs '.join(labels)}", "",
        f"Held-out problems ({dataset(args)}, eval split), {args.problems_per_level} per level ({problems} scored); "
        f"n = {args.n} samples each at temperature 1.0, top-p 1.0, up to {args.max_new_tokens} new tokens, seed "
        f"{args.seed}. Brackets: 95% bootstrap intervals over problems; for the difference, over the per-problem "
        "differences (paired: the models answer the same problems). Each model against the first:", "",
        *tables,
        f"Models: {', '.join(f'{label} {model}' for label, model in zip(labels, runs.values(), strict=True))}. Wall "
        f"time of this run's evaluations on {args.threads} thread(s) (short when they resumed finished work): "
        f"{timing}.",
        f"Plot: {args.plot}. eval.compare's report: {out / 'compare' / 'compare.md'}.", "",
    ])  # fmt: skip
    table_path = args.table or out / "pass_at_k_boundary.md"
    table_path.parent.mkdir(parents=True, exist_ok=True)
    table_path.write_text(text)
    print(text)
    return {
        "summaries": summaries, "ks": ks, "crossover": cross, "paired": paired[labels[1]], "seconds": seconds,
        "compare": compare_report, "crossings": crossings, "paired_by_model": paired,
    }  # fmt: skip


if __name__ == "__main__":
    main()
