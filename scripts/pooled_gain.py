"""Each run's paired gain over a baseline and the gain pooled over the runs, from finished evaluations.

    python scripts/pooled_gain.py BASELINE RUN [RUN ...] [--metric pass@1] [--dataset NAME]

BASELINE and each RUN are `python -m eval.evaluate` output folders (e.g. a cold start and the same DAPO
config trained with seeds 0, 1, 2, all evaluated with one protocol). Printed per run: its mean and its paired
difference with the baseline on the problems both share, with the 95% bootstrap interval over problems
(eval.metrics.paired_difference); then the pooled gain: per problem the mean over runs of (run - baseline),
bootstrapped over problems (scripts/demo_real_report.pooled_gain, what `make demo-real --seeds` reports).
Runs of one config with different seeds share the problems, so pooling removes the seed-to-seed spread that a
mean of separate intervals would keep.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from demo_real_report import pooled_gain  # scripts/, this script's folder

from eval.compare import load_run
from eval.metrics import paired_difference


def per_problem(folder: Path, dataset: str | None, metric: str) -> tuple[str, dict[str, float]]:
    run = load_run(folder)
    name = dataset or next(iter(run))
    if name not in run:
        raise SystemExit(f"{folder} has no evaluation of dataset {name!r} (it has {sorted(run)})")
    problems = run[name]["problems"]
    missing = [pid for pid, record in problems.items() if metric not in record]
    if missing:
        raise SystemExit(f"{folder}: problem {missing[0]} has no {metric!r}; evaluate with that k")
    return name, {pid: float(record[metric]) for pid, record in problems.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("baseline", type=Path)
    parser.add_argument("runs", type=Path, nargs="+")
    parser.add_argument("--metric", default="pass@1", help="a per-problem value of the evaluations (pass@k)")
    parser.add_argument("--dataset", default=None, help="default: the baseline's first dataset")
    args = parser.parse_args(argv)
    dataset, base = per_problem(args.baseline, args.dataset, args.metric)
    print(f"{args.metric} on {dataset}; baseline {args.baseline}: {sum(base.values()) / len(base):.3f}")
    runs = []
    for folder in args.runs:
        _, values = per_problem(folder, dataset, args.metric)
        gain, (low, high), shared = paired_difference(base, values)
        mean = sum(values.values()) / len(values)
        print(f"{folder}: {mean:.3f}, paired {gain:+.3f} [{low:+.3f}, {high:+.3f}] on {shared} problems")
        runs.append(values)
    if len(runs) > 1:
        gain, (low, high), shared = pooled_gain(base, runs)
        print(f"pooled over {len(runs)} runs: {gain:+.3f} [{low:+.3f}, {high:+.3f}] on {shared} problems")
    return 0


if __name__ == "__main__":
    sys.exit(main())
