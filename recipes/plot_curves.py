"""Draw the training curves of one or several runs from their metrics.jsonl, one panel per metric, to a PNG.

    python -m recipes.plot_curves artifacts/demo/dapo --out dapo.png
    python -m recipes.plot_curves runs/grpo runs/dapo --metrics reward entropy groups/std_mean --out compare.png
    python -m recipes.plot_curves runs/dapo --metrics reward entropy --windows 10   # also the means per 10 steps

Every GRPO and SFT run of the recipes writes `metrics.jsonl` (recipes.common.monitor: each logged number,
whatever `report_to` and `save_strategy` say), and that file is read first. A run folder without it (a run
made by another tool or an older version) is read from the `log_history` of its trainer_state.json, in the
folder or its newest checkpoint. Without --metrics, the panels are the usual curves that the runs logged
(held-out pass@1 with its interval as a band, reward, within-group reward std and the share of groups without
any, entropy, KL to the starting model, the clip ratios, completion length, loss, token accuracy); a --metrics name that no run logged is an error that lists the names the runs have
and suggests the closest. With --windows N it also prints, as a markdown table, each curve's mean over steps
1-N, N+1-2N, ...: the figures a write-up quotes, from the same records the plot draws.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from recipes.common.monitor import check_metrics, curves, logged_metrics, read_records

logger = logging.getLogger("recipes.plot_curves")

# held-out pass@1 every eval_steps (recipes.stages.grpo.held_out) is drawn with its interval as a band; the clip
# ratios are TRL's (how often the ratio hit 1 - epsilon, low, and 1 + epsilon_high, high): a collapse's trace
DEFAULT_METRICS = ("eval_pass@1", "reward", "groups/std_mean", "groups/zero_std_frac", "entropy", "kl")
DEFAULT_METRICS += ("clip_ratio/low_mean", "clip_ratio/high_mean", "completions/mean_length")
DEFAULT_METRICS += ("loss", "mean_token_accuracy")


def short_names(runs: list[str]) -> dict[str, str]:
    """Each run folder's legend name: its last path parts, as few as tell the runs apart (dapo/seed0 and
    remedy/seed0 rather than seed0 twice)."""
    parts = {run: Path(run).parts for run in runs}
    for depth in range(1, max((len(p) for p in parts.values()), default=1) + 1):
        names = {run: "/".join(p[-depth:]) for run, p in parts.items()}
        if len(set(names.values())) == len(names):
            return names
    return {run: run for run in runs}


def plot_curves(
    runs: list[Path], out: Path, metrics: list[str] | None = None, labels: list[str] | None = None
) -> dict[str, dict[str, list]]:
    """Draw `metrics` (default: the usual ones the runs logged) for every run, named by `labels` (one per run, in
    order; default: short_names); returns what was drawn."""
    records = {str(run): read_records(run) for run in runs}
    logged = logged_metrics(records)
    if metrics is None:
        metrics = [metric for metric in DEFAULT_METRICS if metric in logged]
    else:
        check_metrics(metrics, logged, runs)
    drawn = {metric: {run: curves(run_records, metric) for run, run_records in records.items()} for metric in metrics}
    drawn = {metric: {run: points for run, points in by_run.items() if points} for metric, by_run in drawn.items()}
    drawn = {metric: by_run for metric, by_run in drawn.items() if by_run}
    if not drawn:
        raise ValueError(f"none of the metrics {metrics} was logged by {', '.join(map(str, runs))}")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = dict(zip(records, labels, strict=True)) if labels else short_names(list(records))
    figure, axes = plt.subplots(1, len(drawn), figsize=(4.0 * len(drawn), 3.2), squeeze=False)
    for axis, (metric, by_run) in zip(axes[0], drawn.items(), strict=True):
        for run, points in by_run.items():
            (line,) = axis.plot(*zip(*points, strict=True), marker=".", label=names[run])
            lows, highs = curves(records[run], f"{metric}_low"), curves(records[run], f"{metric}_high")
            if lows and [step for step, _ in lows] == [step for step, _ in highs]:  # its interval, as a band
                steps, low = zip(*lows, strict=True)
                axis.fill_between(steps, low, [v for _, v in highs], color=line.get_color(), alpha=0.2, linewidth=0)
        axis.set_title(metric, fontsize=10)
        axis.set_xlabel("step")
        axis.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=120)
    plt.close(figure)
    return drawn


def window_means(points: list[tuple[float, float]], size: int) -> dict[str, float]:
    """The mean of the values logged at steps 1..size, size+1..2*size, ..., keyed "first-last" (the window's
    full span, even where the run stopped inside it); a window without a logged value is left out."""
    windows: dict[int, list[float]] = {}
    for step, value in points:
        windows.setdefault((int(step) - 1) // size, []).append(value)
    return {f"{k * size + 1}-{k * size + size}": sum(v) / len(v) for k, v in sorted(windows.items())}


def window_table(drawn: dict[str, dict[str, list]], size: int) -> str:
    """A markdown table: one row per (metric, run folder as given), one column per window of `size` steps."""
    means = {(metric, run): window_means(points, size) for metric, by_run in drawn.items()
             for run, points in by_run.items()}  # fmt: skip
    columns = sorted({window for row in means.values() for window in row}, key=lambda w: int(w.split("-")[0]))
    lines = [f"| metric | run | {' | '.join(columns)} |", "|---|---|" + "---:|" * len(columns)]
    for (metric, run), row in means.items():
        cells = " | ".join(f"{row[window]:.4g}" if window in row else "" for window in columns)
        lines.append(f"| {metric} | {run} | {cells} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> Path:
    import argparse

    from eval.cli import FlagParser

    parser = FlagParser(
        prog="python -m recipes.plot_curves", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("runs", nargs="+", type=Path, help="training output folders (with metrics.jsonl)")
    parser.add_argument("--out", type=Path, default=Path("curves.png"), help="the PNG to write (default curves.png)")
    parser.add_argument("--metrics", nargs="+", default=None, help="metric names as logged, e.g. reward entropy")
    parser.add_argument("--windows", type=int, default=None, metavar="N",
                        help="also print each curve's mean over every N steps, as a markdown table")  # fmt: skip
    parser.add_argument("--labels", nargs="+", default=None,
                        help="the runs' names in the legend, one per run in order (default: the "
                        "shortest ends of their paths that tell them apart)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.labels is not None and len(args.labels) != len(args.runs):
        parser.error(f"--labels names {len(args.labels)} runs, but {len(args.runs)} are given: one label per run")
    if args.windows is not None and args.windows < 1:
        parser.error(f"--windows must be a number of steps, 1 or more (got {args.windows})")
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s", level=logging.INFO)
    try:
        drawn = plot_curves(args.runs, args.out, args.metrics, args.labels)
    except (FileNotFoundError, ValueError) as error:
        sys.stderr.write(f"error: {error}\n")
        raise SystemExit(2) from None
    logger.info("%s: %s for %d run(s)", args.out, ", ".join(drawn), len(args.runs))
    if args.windows:
        sys.stdout.write(window_table(drawn, args.windows))
    return args.out


if __name__ == "__main__":
    main()
