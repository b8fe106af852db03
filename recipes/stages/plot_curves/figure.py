"""Runs' logged records turned into a figure and a table: each run's curves, runs gathered into arms (seeds of one
arm as a group), a group's mean and band, moving averages, one colour per arm in every panel, one legend for the
figure, and each curve's means over windows of steps. recipes/plot_curves.py is the command line over it.
"""

from __future__ import annotations

import re
from pathlib import Path

from recipes.common.training.monitor import check_metrics, curves, logged_metrics, read_records

# held-out pass@1 every eval_steps (recipes.stages.grpo.held_out) is drawn with its interval as a band; the clip
# ratios are TRL's (how often the ratio hit 1 - epsilon, low, and 1 + epsilon_high, high): a collapse's trace
DEFAULT_METRICS = ("eval_pass@1", "reward", "groups/std_mean", "groups/zero_std_frac", "entropy", "kl")
DEFAULT_METRICS += ("clip_ratio/low_mean", "clip_ratio/high_mean", "completions/mean_length")
DEFAULT_METRICS += ("loss", "mean_token_accuracy")

# the last path part of one seed's run: seed0, s1, seed-2, or a name ending in one (dapo_s1, remedy-seed2)
SEED_PART = re.compile(r"^(?:(?P<stem>.+?)[_-])?(?:seed|s)[_-]?\d+$")


def short_names(runs: list[str]) -> dict[str, str]:
    """Each run folder's legend name: its last path parts, as few as tell the runs apart (dapo/seed0 and
    remedy/seed0 rather than seed0 twice)."""
    parts = {run: Path(run).parts for run in runs}
    for depth in range(1, max((len(p) for p in parts.values()), default=1) + 1):
        names = {run: "/".join(p[-depth:]) for run, p in parts.items()}
        if len(set(names.values())) == len(names):
            return names
    return {run: run for run in runs}


def seed_group(run: str) -> str | None:
    """The folder that a run is one seed of (its path without the trailing seed part), or None."""
    path = Path(run)
    match = SEED_PART.match(path.name)
    if not match:
        return None
    return str(path.parent / match["stem"]) if match["stem"] else str(path.parent)


def arms_of(
    runs: list[str], labels: list[str] | None = None, groups: dict[str, list[str]] | None = None, seeds: bool = False
) -> dict[str, list[str]]:
    """The legend's entries, each with its runs, in the order of their first runs: a run is drawn in its --groups
    group, else (with `seeds`) in its seed group of two runs or more, else alone under its label (default: the
    short name); the unnamed groups are named as short_names names folders."""
    named = {run: name for name, members in (groups or {}).items() for run in members}
    by_seeds: dict[str, list[str]] = {}
    if seeds:
        for run in runs:
            if run not in named and seed_group(run) is not None:
                by_seeds.setdefault(seed_group(run), []).append(run)
        for run in runs:  # dapo beside dapo_s1 and dapo_s2: the seed that carries no suffix
            if run not in named and run in by_seeds and run not in by_seeds[run]:
                by_seeds[run].insert(0, run)
        by_seeds = {key: members for key, members in by_seeds.items() if len(members) > 1}  # one seed: a run
    keys = {run: named.get(run) or next((k for k, members in by_seeds.items() if run in members), run) for run in runs}
    unnamed = list(dict.fromkeys(key for run, key in keys.items() if run not in named))
    names = short_names(unnamed)
    if labels:
        names.update({run: label for run, label in zip(runs, labels, strict=True) if keys[run] == run})
    arms: dict[str, list[str]] = {}
    for run in runs:
        arms.setdefault(named.get(run) or names[keys[run]], []).append(run)
    return arms


def smoothed(points: list[tuple[float, float]], window: int) -> list[tuple[float, float]]:
    """Each value replaced by the mean of the last `window` logged values up to it (fewer at the start)."""
    values = [value for _, value in points]
    averaged = []
    for i, (step, _) in enumerate(points):
        last = values[max(0, i - window + 1) : i + 1]
        averaged.append((step, sum(last) / len(last)))
    return averaged


def group_curve(
    curves_of_runs: list[list[tuple[float, float]]], window: int
) -> list[tuple[float, float, float, float]]:
    """(step, mean, min, max) over the runs' smoothed values at each step that any of them logged; a step that
    some runs did not log is averaged over those that did."""
    at_step: dict[float, list[float]] = {}
    for points in curves_of_runs:
        for step, value in smoothed(points, window):
            at_step.setdefault(step, []).append(value)
    return [(step, sum(v) / len(v), min(v), max(v)) for step, v in sorted(at_step.items())]


def palette(count: int) -> list:
    """One colour per legend entry, fixed for the whole figure: matplotlib's cycle, or a colormap past it."""
    import matplotlib

    cycle = matplotlib.rcParams["axes.prop_cycle"].by_key().get("color", [])
    if count <= len(cycle):
        return cycle[:count]
    return [matplotlib.colormaps["turbo"](i / max(1, count - 1)) for i in range(count)]


def read_curves(runs: list[Path], metrics: list[str] | None = None) -> tuple[dict, dict[str, dict[str, list]]]:
    """Every run's records and, per metric (default: the usual ones the runs logged), each run's points."""
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
    return records, drawn


def draw_figure(
    records: dict, drawn: dict[str, dict[str, list]], arms: dict[str, list[str]], smooth: int = 1, raw: bool = False
):
    """The figure of `drawn`, one panel per metric and one colour per arm (a run or a group of runs)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    colours = dict(zip(arms, palette(len(arms)), strict=True))
    figure, axes = plt.subplots(1, len(drawn), figsize=(4.0 * len(drawn), 3.9), squeeze=False, layout="constrained")
    for axis, (metric, by_run) in zip(axes[0], drawn.items(), strict=True):
        # held-out pass@1 comes every eval_steps with its own interval: a moving average would smear its few points
        window = 1 if any(curves(records[run], f"{metric}_low") for run in by_run) else smooth
        for name, members in arms.items():
            present = [run for run in members if run in by_run]
            colour = colours[name]
            if raw and (len(members) > 1 or window > 1):
                for run in present:
                    axis.plot(*zip(*by_run[run], strict=True), color=colour, linewidth=0.6, alpha=0.5, label=f"_{run}")
            if len(members) == 1 and present:
                run = present[0]
                axis.plot(*zip(*smoothed(by_run[run], window), strict=True), marker=".", color=colour, label=name)
                lows, highs = curves(records[run], f"{metric}_low"), curves(records[run], f"{metric}_high")
                if lows and [step for step, _ in lows] == [step for step, _ in highs]:  # its interval, as a band
                    steps, low = zip(*lows, strict=True)
                    high = [value for _, value in highs]
                    axis.fill_between(steps, low, high, color=colour, alpha=0.2, linewidth=0, gid=f"{name} interval")
            elif present:
                steps, mean, low, high = zip(*group_curve([by_run[run] for run in present], window), strict=True)
                axis.plot(steps, mean, color=colour, linewidth=1.6, label=name)
                axis.fill_between(steps, low, high, color=colour, alpha=0.2, linewidth=0, gid=f"{name} band")
        axis.set_title(metric, fontsize=10)
        axis.set_xlabel("step")
        axis.grid(alpha=0.3)
    notes = ["line: mean over a group's runs, band: their min to max"] if any(len(m) > 1 for m in arms.values()) else []
    notes += [f"moving average over {smooth} logged steps"] if smooth > 1 else []
    handles = [Line2D([], [], color=colours[name], marker="." if len(arms[name]) == 1 else None) for name in arms]
    labels = [name if len(runs) == 1 else f"{name} ({len(runs)} runs)" for name, runs in arms.items()]
    figure.legend(handles, labels, loc="outside lower center", ncol=min(len(arms), 4), fontsize=8,
                  title="; ".join(notes) or None, title_fontsize=8)  # fmt: skip
    return figure


def window_means(points: list[tuple[float, float]], size: int) -> dict[str, float]:
    """The mean of the values logged at steps 1..size, size+1..2*size, ..., keyed "first-last" (the window's
    full span, even where the run stopped inside it); a window without a logged value is left out."""
    windows: dict[int, list[float]] = {}
    for step, value in points:
        windows.setdefault((int(step) - 1) // size, []).append(value)
    return {f"{k * size + 1}-{k * size + size}": sum(v) / len(v) for k, v in sorted(windows.items())}


def window_table(drawn: dict[str, dict[str, list]], size: int, groups: dict[str, list[str]] | None = None) -> str:
    """A markdown table: one row per (metric, run folder as given), one column per window of `size` steps; after
    a metric's runs, one row per group of several runs: the mean over its runs of their window means (over the
    runs that logged something in that window)."""
    means: dict[tuple[str, str], dict[str, float]] = {}
    for metric, by_run in drawn.items():
        for run, points in by_run.items():
            means[metric, run] = window_means(points, size)
        for name, members in (groups or {}).items():
            rows = [means[metric, run] for run in members if run in by_run]
            if len(members) > 1 and rows:
                spans = {window for row in rows for window in row}
                means[metric, f"{name} (mean of {len(rows)} runs)"] = {
                    w: sum(row[w] for row in rows if w in row) / sum(w in row for row in rows) for w in spans
                }
    columns = sorted({window for row in means.values() for window in row}, key=lambda w: int(w.split("-")[0]))
    lines = [f"| metric | run | {' | '.join(columns)} |", "|---|---|" + "---:|" * len(columns)]
    for (metric, run), row in means.items():
        cells = " | ".join(f"{row[window]:.4g}" if window in row else "" for window in columns)
        lines.append(f"| {metric} | {run} | {cells} |")
    return "\n".join(lines) + "\n"
