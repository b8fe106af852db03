"""Draw the training curves of one or several runs from their metrics.jsonl, one panel per metric, to a PNG.

    python -m recipes.plot_curves artifacts/demo/dapo --out dapo.png
    python -m recipes.plot_curves runs/grpo runs/dapo --metrics reward entropy groups/std_mean --out compare.png
    python -m recipes.plot_curves runs/dapo --metrics reward entropy --windows 10   # also the means per 10 steps
    python -m recipes.plot_curves runs/{dapo,remedy}/seed{0,1,2} --group-seeds --smooth 5 --raw --out arms.png
    python -m recipes.plot_curves --groups sync=runs/dapo,runs/dapo_s1 stale=runs/stale/seed0,runs/stale/seed1

Every GRPO and SFT run of the recipes writes `metrics.jsonl` (recipes.common.training.monitor: each logged number,
whatever `report_to` and `save_strategy` say), and that file is read first. A run folder without it (a run
made by another tool or an older version) is read from the `log_history` of its trainer_state.json, in the
folder or its newest checkpoint. Without --metrics, the panels are the usual curves that the runs logged
(held-out pass@1 with its interval as a band, reward, within-group reward std and the share of groups without
any, entropy, KL to the starting model, the clip ratios, completion length, loss, token accuracy); a --metrics
name that no run logged is an error that lists the names the runs have and suggests the closest. With
--windows N it also prints, as a markdown table, each curve's mean over steps 1-N, N+1-2N, ...: the figures a
write-up quotes, from the same records the plot draws.

One legend below the panels names every run (or group), and each keeps its colour in every panel, so that a
panel where one run logged nothing does not shift the others' colours. The log names the PNG's absolute path.

Seeds of one arm are read together as a group, drawn as one line and a band, when asked: --groups NAME=RUN,RUN
names them (run folders not given before are added; put the run folders before --groups, which takes every
word after it), and --group-seeds groups the run folders that differ only by a trailing seed part
(dapo/seed0 and dapo/seed1, or dapo_s1 and dapo_s2, are `dapo`; a folder named as the group, dapo beside
dapo_s1, is its seed 0 and joins it). Without these flags each run is a line of its own. A group's line is, at
each step, the mean over its runs of their (smoothed) values, and its band spans their minimum to maximum
there: at a step that only some of its runs logged, the mean and the band are over those runs. A group of one
run is drawn as that run (a lone seed keeps its own name, or its --labels one). --smooth N replaces each run's
value at a step by the mean of its last N logged values up to that step (a trailing moving average, over fewer
at the start; N=1, the default, draws the values as logged; a metric logged with an interval, held-out pass@1
every eval_steps, is always drawn as logged). --raw also draws each run's values as logged, as thin lines in
its group's colour. --windows keeps its row per run and adds one per group: the mean over the group's runs of
their window means.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from recipes.stages.plot_curves.figure import arms_of, draw_figure, read_curves, window_table

logger = logging.getLogger("recipes.plot_curves")


def plot_curves(
    runs: list[Path],
    out: Path,
    metrics: list[str] | None = None,
    labels: list[str] | None = None,
    groups: dict[str, list[str]] | None = None,
    group_seeds: bool = False,
    smooth: int = 1,
    raw: bool = False,
) -> dict[str, dict[str, list]]:
    """Draw `metrics` (default: the usual ones the runs logged) for every run, named by `labels` (one per run, in
    order; default: short_names) or gathered into `groups` (name: run folders as given) and, with `group_seeds`,
    into seed groups; write the PNG to `out` and return what was drawn, per metric and run."""
    records, drawn = read_curves(runs, metrics)
    figure = draw_figure(records, drawn, arms_of(list(records), labels, groups, group_seeds), smooth, raw)
    import matplotlib.pyplot as plt

    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=120)
    plt.close(figure)
    logger.info("wrote %s: %s for %d run(s)", out.resolve(), ", ".join(drawn), len(runs))
    return drawn


def parse_groups(specs: list[str], runs: list[Path]) -> tuple[dict[str, list[str]], list[Path]]:
    """--groups NAME=RUN,RUN ...: each group's runs as the run folders are keyed (a folder given twice, once as a
    positional run, is the same run), and the run folders with those added that were not given before."""
    given = {path.resolve(): path for path in runs}
    runs = list(runs)
    groups: dict[str, list[str]] = {}
    for spec in specs:
        name, _, members = spec.partition("=")
        if not name or not members or name in groups:
            problem = f"names the group {name!r} twice" if name in groups else "is not NAME=RUN,RUN"
            raise ValueError(f"--groups {spec!r} {problem} (put the run folders before --groups)")
        groups[name] = []
        for member in filter(None, members.split(",")):
            path = given.setdefault(Path(member).resolve(), Path(member))
            if path not in runs:
                runs.append(path)
            if any(str(path) in others for others in groups.values()):
                raise ValueError(f"--groups puts {member} in two groups")
            groups[name].append(str(path))
    return groups, runs


def main(argv: list[str] | None = None) -> Path:
    import argparse

    from eval.cli import FlagParser

    parser = FlagParser(
        prog="python -m recipes.plot_curves", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("runs", nargs="*", type=Path, help="training output folders (with metrics.jsonl)")
    parser.add_argument("--out", type=Path, default=Path("curves.png"), help="the PNG to write (default curves.png)")
    parser.add_argument("--metrics", nargs="+", default=None, help="metric names as logged, e.g. reward entropy")
    parser.add_argument("--windows", type=int, default=None, metavar="N",
                        help="also print each curve's mean over every N steps, as a markdown table")  # fmt: skip
    parser.add_argument("--labels", nargs="+", default=None,
                        help="the runs' names in the legend, one per run in order (default: the "
                        "shortest ends of their paths that tell them apart)")  # fmt: skip
    parser.add_argument("--groups", nargs="+", default=[], metavar="NAME=RUN,RUN",
                        help="draw these runs as one group NAME: their mean and min-max band")  # fmt: skip
    parser.add_argument("--group-seeds", action="store_true",
                        help="group the runs whose folders differ only by a trailing seed part: "
                        "seed0, _s1")  # fmt: skip
    parser.add_argument("--smooth", type=int, default=1, metavar="N",
                        help="a trailing moving average over N logged steps (default 1: none)")  # fmt: skip
    parser.add_argument("--raw", action="store_true", help="also draw each run's values as logged, thin")
    args = parser.parse_args(argv)
    try:
        groups, runs = parse_groups(args.groups, args.runs)
    except ValueError as error:
        parser.error(str(error))
    if not runs:
        parser.error("no run folder given: name one or more, or --groups NAME=RUN,RUN")
    if args.labels is not None and len(args.labels) != len(runs):
        parser.error(f"--labels names {len(args.labels)} runs, but {len(runs)} are given: one label per run")
    if args.windows is not None and args.windows < 1:
        parser.error(f"--windows must be a number of steps, 1 or more (got {args.windows})")
    if args.smooth < 1:
        parser.error(f"--smooth must be a number of logged steps, 1 or more (got {args.smooth})")
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s", level=logging.INFO)
    try:
        drawn = plot_curves(runs, args.out, args.metrics, args.labels, groups, args.group_seeds, args.smooth, args.raw)
    except (FileNotFoundError, ValueError) as error:
        sys.stderr.write(f"error: {error}\n")
        raise SystemExit(2) from None
    if args.windows:
        arms = arms_of(list(map(str, runs)), args.labels, groups, args.group_seeds)
        sys.stdout.write(window_table(drawn, args.windows, arms))
    return args.out


if __name__ == "__main__":
    main()
