"""How many held-out problems x samples a paired comparison needs to see a given gain: a power analysis.

    python -m eval.power artifacts/demo-real/eval/sft [--gain 0.05] [--seeds 3] [--power 0.8] [--samples 4 8 16]

A comparison of two models on the same problems (eval.metrics.paired_difference) estimates the mean over
problems of d_i = pass@1 of the new model on problem i minus the old one's. Each pass@1 is a mean of n
samples, so for a problem with pass rate p the estimate's sampling variance is p(1 - p)/n; the new model is
averaged over S training seeds (each seed evaluated with n samples), so

    Var(d_i) = p_i (1 - p_i) / n  +  p_i (1 - p_i) / (n S)  +  tau^2

with p_i the old model's pass rates (the new model's are taken to be close: the gains looked for are small)
and tau^2 the spread of the true effect across problems (0 unless a pilot comparison gives it: `--pilot DIR`
reads a new model's evaluation of the same problems and takes tau^2 as the variance of its per-problem
differences minus their sampling part; counted whole, not divided by S, which errs on the safe side since
part of it is one seed's own).
The mean over P problems has variance mean_i Var(d_i) / P, and a two-sided test at level alpha with power
1 - beta needs

    P >= (z_{1-alpha/2} + z_{1-beta})^2 * mean_i Var(d_i) / gain^2.

What it adds to eval.metrics: the interval there is computed after the fact; this sizes the set before.
The pass rates come from an evaluation's per_problem.jsonl (its `pass@1` column).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from statistics import NormalDist


def problem_variance(p: float, samples: int, seeds: int = 1, tau2: float = 0.0) -> float:
    """Var(d_i) of one problem with pass rate p (see the module docstring)."""
    binomial = p * (1 - p)
    return binomial / samples + binomial / (samples * seeds) + tau2


def problems_needed(
    pass_rates: list[float],
    samples: int,
    gain: float,
    seeds: int = 1,
    power: float = 0.8,
    alpha: float = 0.05,
    tau2: float = 0.0,
) -> int:
    """The fewest problems for which a paired gain of `gain` is detected with `power` at two-sided `alpha`.

    The problems are assumed to be drawn like `pass_rates` (their mean variance stands for a new draw's)."""
    if not pass_rates:
        raise ValueError("no pass rates: evaluate the old model first (its per_problem.jsonl)")
    if gain <= 0:
        raise ValueError(f"gain must be positive, got {gain}")
    mean_variance = sum(problem_variance(p, samples, seeds, tau2) for p in pass_rates) / len(pass_rates)
    z = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)
    return math.ceil(z * z * mean_variance / gain**2)


def detectable_gain(
    pass_rates: list[float], problems: int, samples: int, seeds: int = 1, power: float = 0.8, alpha: float = 0.05,
    tau2: float = 0.0,
) -> float:  # fmt: skip
    """The smallest gain `problems` problems of `samples` samples detect with `power` (the inverse)."""
    mean_variance = sum(problem_variance(p, samples, seeds, tau2) for p in pass_rates) / len(pass_rates)
    z = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)
    return z * math.sqrt(mean_variance / problems)


def pilot_effect_variance(old: dict[str, float], new: dict[str, float], samples: int) -> float:
    """tau^2 from one pilot comparison: the variance of its per-problem differences minus what sampling explains.

    `old` and `new` map problem id -> pass@1, each the mean of `samples` samples; one seed, so the sampling
    part is p_old(1-p_old)/n + p_new(1-p_new)/n per problem. Never below 0."""
    shared = sorted(set(old) & set(new))
    if len(shared) < 2:
        raise ValueError("the pilot shares fewer than 2 problems with the old evaluation")
    differences = [new[key] - old[key] for key in shared]
    mean = sum(differences) / len(differences)
    observed = sum((d - mean) ** 2 for d in differences) / (len(differences) - 1)
    sampling = sum(old[k] * (1 - old[k]) / samples + new[k] * (1 - new[k]) / samples for k in shared) / len(shared)
    return max(observed - sampling, 0.0)


def read_pass_rates(folder: Path) -> tuple[dict[str, float], int]:
    """problem id -> pass@1 from an evaluation folder (or its one run folder inside), and its samples per problem."""
    folder = Path(folder)
    files = (
        [folder / "per_problem.jsonl"]
        if (folder / "per_problem.jsonl").is_file()
        else sorted(folder.glob("*/per_problem.jsonl"))
    )
    if not files:
        raise SystemExit(f"eval.power: no per_problem.jsonl in {folder} (an eval.evaluate output folder)")
    rows = [json.loads(line) for line in files[0].read_text().splitlines() if line.strip()]
    summary = files[0].parent / "summary.json"
    samples = json.loads(summary.read_text())["protocol"]["n"] if summary.is_file() else None
    return {str(row["id"]): float(row["pass@1"]) for row in rows}, samples


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("evaluation", type=Path, help="the old model's eval.evaluate folder")
    parser.add_argument("--gain", type=float, default=0.05)
    parser.add_argument("--seeds", type=int, default=1, help="training seeds the new model's pass@1 is averaged over")
    parser.add_argument("--power", type=float, default=0.8)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--samples", type=int, nargs="+", default=[4, 8, 16])
    parser.add_argument("--pilot", type=Path, help="a new model's evaluation of the same problems: tau^2 from it")
    args = parser.parse_args(argv)
    old, n_old = read_pass_rates(args.evaluation)
    tau2 = 0.0
    if args.pilot is not None:
        new, n_new = read_pass_rates(args.pilot)
        tau2 = pilot_effect_variance(old, new, min(n_old or 1, n_new or 1))
    rates = list(old.values())
    lines = [
        f"{len(rates)} problems in {args.evaluation} (mean pass@1 {sum(rates) / len(rates):.3f}, {n_old} samples "
        f"each); gain {args.gain}, power {args.power}, two-sided alpha {args.alpha}, {args.seeds} seed(s), "
        f"tau^2 {tau2:.4f}" + (" (from the pilot)" if args.pilot else " (no pilot: sampling noise alone)"),
        "",
        "| samples per problem | problems needed | gain detectable with these problems |",
        "|---:|---:|---:|",
    ]
    for samples in args.samples:
        needed = problems_needed(rates, samples, args.gain, args.seeds, args.power, args.alpha, tau2)
        here = detectable_gain(rates, len(rates), samples, args.seeds, args.power, args.alpha, tau2)
        lines.append(f"| {samples} | {needed} | {here:.3f} |")
    text = "\n".join(lines)
    print(text)
    return text


if __name__ == "__main__":
    main()
