"""Compare two evaluation runs: pass@k curves on one plot, the crossover k, and the gained and lost problems.

    python -m eval.compare runs/base runs/rl [--output compare/]

RL often raises pass@1 while pass@k at large k stays level or falls (the "does RL teach anything new"
debate): the report shows where the curves cross, and which problems each run solves at the largest
k that the other does not, per dataset both runs share. Written: compare.md and pass_at_k_<dataset>.png.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from eval.evaluate import plot_pass_at_k


def load_run(folder: Path) -> dict[str, dict]:
    """dataset -> {"summary": ..., "problems": {id: per-problem record}} for every finished dataset of a run."""
    run = {}
    for summary_path in sorted(folder.glob("*/summary.json")):
        problems = {}
        for line in (summary_path.parent / "per_problem.jsonl").read_text().splitlines():
            record = json.loads(line)
            problems[record["id"]] = record
        run[summary_path.parent.name] = {"summary": json.loads(summary_path.read_text()), "problems": problems}
    if not run:
        raise SystemExit(
            f"{folder} holds no finished evaluation (no */summary.json); run python -m eval.evaluate first"
        )
    return run


def common_ks(a: dict, b: dict) -> list[int]:
    keys = {int(name[5:]) for name in a["metrics"] if name.startswith("pass@")}
    keys &= {int(name[5:]) for name in b["metrics"] if name.startswith("pass@")}
    return sorted(keys)


def crossover(ks: list[int], a: list[float], b: list[float]) -> float | None:
    """The k (interpolated on log2 k) where curve b - a changes sign, or None when one stays above."""
    import math

    differences = [y - x for x, y in zip(a, b, strict=True)]
    for i in range(1, len(ks)):
        before, after = differences[i - 1], differences[i]
        if before == 0:
            return float(ks[i - 1])
        if before * after < 0:
            low, high = math.log2(ks[i - 1]), math.log2(ks[i])
            return 2 ** (low + (high - low) * before / (before - after))
    return None


def solved_at(record: dict, k: int) -> bool:
    """Solved at k: at least one of the k samples is correct with probability above one half."""
    return record.get(f"pass@{k}", 0.0) > 0.5


def compare(run_a: Path, run_b: Path, output: Path) -> str:
    a, b = load_run(run_a), load_run(run_b)
    output.mkdir(parents=True, exist_ok=True)
    lines = [f"# {run_a.name} vs {run_b.name}", ""]
    for dataset in sorted(set(a) & set(b)):
        sa, sb = a[dataset]["summary"], b[dataset]["summary"]
        ks = common_ks(sa, sb)
        curve_a = [sa["metrics"][f"pass@{k}"]["mean"] for k in ks]
        curve_b = [sb["metrics"][f"pass@{k}"]["mean"] for k in ks]
        plot_pass_at_k({run_a.name: sa, run_b.name: sb}, ks, output / f"pass_at_k_{dataset}.png", dataset)
        cross = crossover(ks, curve_a, curve_b)
        shared = sorted(set(a[dataset]["problems"]) & set(b[dataset]["problems"]))
        top = ks[-1]
        only_a = [
            pid
            for pid in shared
            if solved_at(a[dataset]["problems"][pid], top) and not solved_at(b[dataset]["problems"][pid], top)
        ]
        only_b = [
            pid
            for pid in shared
            if solved_at(b[dataset]["problems"][pid], top) and not solved_at(a[dataset]["problems"][pid], top)
        ]
        lines += [f"## {dataset} ({len(shared)} problems in both)", "", f"![pass@k](pass_at_k_{dataset}.png)", ""]
        lines += ["| k | " + run_a.name + " | " + run_b.name + " | difference |", "|---:|---:|---:|---:|"]
        for k, x, y in zip(ks, curve_a, curve_b, strict=True):
            low_a, high_a = sa["metrics"][f"pass@{k}"]["ci95"]
            low_b, high_b = sb["metrics"][f"pass@{k}"]["ci95"]
            lines.append(
                f"| {k} | {x:.3f} [{low_a:.3f}, {high_a:.3f}] | {y:.3f} [{low_b:.3f}, {high_b:.3f}] | {y - x:+.3f} |"
            )
        lines.append("")
        lines.append(
            f"Crossover: the curves cross near k = {cross:.1f}." if cross is not None
            else f"Crossover: none for k in {ks[0]}..{ks[-1]}: one run stays ahead."
        )  # fmt: skip
        lines.append(f"At k = {top}: solved only by {run_a.name}: {len(only_a)}; only by {run_b.name}: {len(only_b)}.")
        if only_a or only_b:
            lines.append(f"- only {run_a.name}: {', '.join(only_a[:20])}{' ...' if len(only_a) > 20 else ''}")
            lines.append(f"- only {run_b.name}: {', '.join(only_b[:20])}{' ...' if len(only_b) > 20 else ''}")
        lines.append("")
    if len(lines) == 2:
        raise SystemExit(f"{run_a} and {run_b} share no dataset")
    report = "\n".join(lines)
    (output / "compare.md").write_text(report + "\n")
    return report


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_a", type=Path)
    parser.add_argument("run_b", type=Path)
    parser.add_argument("--output", type=Path, default=None, help="default: <run_b>/compare_<run_a name>")
    args = parser.parse_args(argv)
    report = compare(args.run_a, args.run_b, args.output or args.run_b / f"compare_{args.run_a.name}")
    print(report)
    return report


if __name__ == "__main__":
    main()
