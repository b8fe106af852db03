"""The report of scripts/bench/length_penalty.py: accuracy and completion length per level for each length-penalty
arm against lambda = 0, where each arm gives up first, and the normalisation trap's two arms over steps.

Pooling over seeds (`pooled_by_level`): seed k of an arm is paired with seed k of its parent (same cold start,
same data order, same held-out problems and sampling streams); per problem the mean over the shared seeds of
(arm - parent), then the mean over the level's problems with a bootstrap interval over problems. An arm "gives
up" at a level when that interval lies below 0 for accuracy.
"""

from __future__ import annotations

from pathlib import Path

from eval.metrics import mean_std, pooled_paired_difference


def per_problem(run: dict, key: str, level: int | None = None) -> dict[str, float]:
    """problem id -> its value of `key` ("pass@1" or "tokens"), for one level or all of them."""
    return {pid: p[key] for pid, p in run["problems"].items() if level is None or p["level"] == level}


def levels_of(run: dict) -> list[int]:
    return sorted({problem["level"] for problem in run["problems"].values()})


def mean_of(run: dict, key: str, level: int | None = None) -> float:
    values = per_problem(run, key, level)
    return sum(values.values()) / len(values)


def pooled_difference(arm: dict[int, dict], parent: dict[int, dict], key: str, level: int | None = None) -> dict:
    """arm - parent over the seeds both ran: per seed, and pooled (per problem the mean over seeds of the
    difference, bootstrapped over problems)."""
    seeds = sorted(set(arm) & set(parent))
    if not seeds:
        raise ValueError("the two arms share no seed: nothing to pair")
    pairs = [(per_problem(parent[seed], key, level), per_problem(arm[seed], key, level)) for seed in seeds]
    if not set.intersection(*(set(first) & set(second) for first, second in pairs)):
        raise ValueError(f"the runs share no held-out problem{'' if level is None else f' of level {level}'}")
    pooled = pooled_paired_difference(pairs)
    return {**pooled, "per_seed": dict(zip(seeds, pooled.pop("per_pair"), strict=True)), "seeds": seeds}


def gives_up_at(arm: dict[int, dict], parent: dict[int, dict]) -> list[int]:
    """The levels where the arm's accuracy is below its parent's beyond noise (pooled interval below 0)."""
    levels = levels_of(next(iter(parent.values())))
    return [level for level in levels if pooled_difference(arm, parent, "pass@1", level)["ci95"][1] < 0]


def _cell(d: dict, digits: int = 3) -> str:
    return f"{d['mean']:+.{digits}f} [{d['ci95'][0]:+.{digits}f}, {d['ci95'][1]:+.{digits}f}]"


def _seeds(runs: dict[int, dict], key: str) -> str:
    mean, std = mean_std([mean_of(run, key) for run in runs.values()])
    return f"{mean:.3f} ± {std:.3f}" if key == "pass@1" else f"{mean:.1f} ± {std:.1f}"


def length_tables(found: dict, arms: dict) -> list[str]:
    """The length experiment's tables: overall, accuracy by level, tokens by level, where each arm gives up."""
    base_name = next(name for name, arm in arms.items() if arm.parent is None)
    base = found.get(base_name) or {}
    done = {name: found[name] for name in arms if found.get(name)}
    if not base or not done:
        return ["(no finished run of lambda = 0 yet)"]
    start = found.get("start")
    lines = ["| arm | seeds | accuracy (mean ± std over seeds) | tokens | accuracy vs lambda 0, pooled [95% CI] "
             "| tokens vs lambda 0 | levels where accuracy falls (CI below 0) |", "|---|---:|---|---|---|---|---|"]  # fmt: skip
    if start:
        lines.append(f"| cold start | | {mean_of(start, 'pass@1'):.3f} | {mean_of(start, 'tokens'):.1f} | | | |")
    for name, runs in done.items():
        paired = arms[name].parent is not None and set(runs) & set(base)
        accuracy = _cell(pooled_difference(runs, base, "pass@1")) if paired else ""
        tokens = _cell(pooled_difference(runs, base, "tokens"), 1) if paired else ""
        fall = ", ".join(map(str, gives_up_at(runs, base))) or "none" if paired else ""
        lines.append(f"| {arms[name].label} | {len(runs)} | {_seeds(runs, 'pass@1')} | {_seeds(runs, 'tokens')} "
                     f"| {accuracy} | {tokens} | {fall} |")  # fmt: skip
    levels = levels_of(next(iter(base.values())))
    for key, what, digits in (("pass@1", "accuracy", 3), ("tokens", "completion tokens", 1)):
        lines += ["", f"{what.capitalize()} by level (hops): lambda 0's mean over seeds, then each arm minus lambda 0, "
                  "pooled over seeds [95% CI]:", ""]  # fmt: skip
        others = [name for name in done if name != base_name and set(done[name]) & set(base)]
        lines.append("| level | " + " | ".join([arms[base_name].label, *(arms[n].label for n in others)]) + " |")
        lines.append("|---:|" + "---|" * (1 + len(others)))
        for level in levels:
            base_mean = sum(mean_of(run, key, level) for run in base.values()) / len(base)
            cells = [f"{base_mean:.{digits}f}"]
            cells += [_cell(pooled_difference(done[n], base, key, level), digits) for n in others]
            lines.append(f"| {level} | " + " | ".join(cells) + " |")
    return lines


def window(values: list[float | None], first: bool, size: int) -> float | None:
    """The mean of the first (or last) `size` logged values."""
    logged = [value for value in values if value is not None]
    part = logged[:size] if first else logged[-size:]
    return sum(part) / len(part) if part else None


def trap_rows(found: dict, arms: dict) -> list[str]:
    """The trap's table: per arm and seed, training accuracy and length at the start and the end, held-out
    accuracy and tokens; then group minus none, paired."""
    lines = ["| arm | seed | train accuracy, first 3 steps -> last 5 | train length, first 3 -> last 5 "
             "| held-out accuracy | held-out tokens |", "|---|---:|---|---|---:|---:|"]  # fmt: skip
    weak = found.get("weak_start")
    if weak:
        lines.append(f"| weak start | | | | {mean_of(weak, 'pass@1'):.3f} | {mean_of(weak, 'tokens'):.1f} |")
    for name in arms:
        for seed, run in sorted((found.get(name) or {}).items()):
            curve = run["curves"]
            acc = [window(curve["accuracy"], True, 3), window(curve["accuracy"], False, 5)]
            length = [window(curve["length"], True, 3), window(curve["length"], False, 5)]
            lines.append(f"| {arms[name].label} | {seed} | {acc[0]:.3f} -> {acc[1]:.3f} | {length[0]:.1f} -> "
                         f"{length[1]:.1f} | {mean_of(run, 'pass@1'):.3f} | {mean_of(run, 'tokens'):.1f} |")  # fmt: skip
    for name, arm in arms.items():
        runs, parent = found.get(name) or {}, found.get(arm.parent) or {}
        if arm.parent and set(runs) & set(parent):
            accuracy, tokens = (pooled_difference(runs, parent, key) for key in ("pass@1", "tokens"))
            per_seed = ", ".join(f"seed {seed} {value:+.1f}" for seed, value in tokens["per_seed"].items())
            lines += ["", f"{arm.label} minus {arms[arm.parent].label}, paired on seeds and problems: held-out "
                      f"accuracy {_cell(accuracy)}, tokens {_cell(tokens, 1)} ({per_seed})."]  # fmt: skip
    return lines


def write_plots(found: dict, length_experiments: dict[str, dict], trap: dict, folder: Path) -> None:
    """length_by_level[_<scale>].png for each length experiment with runs, and length_trap.png."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    for scale, length_arms in length_experiments.items():
        done = {name: found[name] for name in length_arms if found.get(name)}
        if not done:
            continue
        figure, axes = plt.subplots(1, 2, figsize=(11, 4.5))
        for name, runs in done.items():
            levels = levels_of(next(iter(runs.values())))
            for ax, key in zip(axes, ("pass@1", "tokens"), strict=True):
                ys = [sum(mean_of(run, key, level) for run in runs.values()) / len(runs) for level in levels]
                ax.plot(levels, ys, marker="o", label=f"{length_arms[name].label} ({len(runs)} seeds)")
        for ax, label in zip(axes, ("held-out accuracy (pass@1)", "completion tokens"), strict=True):
            ax.set_xlabel("level (hops)")
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
        axes[0].legend(fontsize=7)
        figure.suptitle(f"DAPO with a length penalty, scale_rewards {scale}: per level, mean over seeds")
        figure.tight_layout()
        figure.savefig(
            folder / ("length_by_level.png" if scale == "group" else f"length_by_level_{scale}.png"), dpi=110
        )
        plt.close(figure)
    if any(found.get(name) for name in trap):
        figure, axes = plt.subplots(1, 2, figsize=(11, 4.5))
        for colour, name in zip(("tab:blue", "tab:red"), trap, strict=False):
            for seed, run in sorted((found.get(name) or {}).items()):
                curve = run["curves"]
                for ax, key in zip(axes, ("accuracy", "length"), strict=True):
                    points = [(s, v) for s, v in zip(curve["step"], curve[key], strict=True) if v is not None]
                    ax.plot(*zip(*points, strict=True), color=colour, alpha=0.8,
                            label=f"{trap[name].label}" if seed == min(found[name]) else None)  # fmt: skip
        for ax, label in zip(axes, ("training accuracy (batch mean)", "mean completion length"), strict=True):
            ax.set_xlabel("step")
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
        axes[0].legend(fontsize=7)
        figure.suptitle("The normalisation trap: one line per seed")
        figure.tight_layout()
        figure.savefig(folder / "length_trap.png", dpi=110)
        plt.close(figure)


def write_report(found: dict, length_experiments: dict[str, dict], trap: dict, args) -> dict:
    """The markdown tables at args.table and the plots in args.plot_dir (`length_experiments`: scale_rewards ->
    that experiment's arms); returns what they were made from."""
    setup = (f"{args.steps} steps of 8 prompts x 8 samples; held-out: {args.eval_problems} problems a level, "
             f"{args.eval_samples} samples each at temperature 1; seeds {args.seeds}")  # fmt: skip
    lines = ["# Length penalties per level, and the normalisation trap", "", f"Setup: {setup}.", "",
             *(line for scale, arms in length_experiments.items() for line in (
                 f"## Accuracy minus lambda x length, from the cold start, scale_rewards {scale}", "",
                 *length_tables(found, arms), "")),
             f"## The normalisation trap (weak start: {args.weak_steps} SFT steps)", "", *trap_rows(found, trap)]  # fmt: skip
    args.table.parent.mkdir(parents=True, exist_ok=True)
    args.table.write_text("\n".join(lines) + "\n")
    write_plots(found, length_experiments, trap, args.plot_dir)
    return found
