"""Compare two evaluation runs: pass@k curves on one plot, the crossover k, and the gained and lost problems.

    python -m eval.compare runs/base runs/rl [--output compare/]

RL often raises pass@1 while pass@k at large k stays level or falls (the "does RL teach anything new"
debate): the report shows where the curves cross, and which problems each run solves at the largest
k that the other does not, per dataset both runs share. Written: compare.md and pass_at_k_<dataset>.png.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from basics.atomic_files import write_atomic
from eval.cli import FlagParser
from eval.metrics import paired_difference
from eval.report import plot_pass_at_k


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
    """The k (interpolated on log2 k) where run b goes from behind run a to ahead of it (or back); None if never.

    Equal values are ties, not crossings: two curves that meet at k = 1 (pass@1 equal) and then part
    never cross. A curve that touches the other and returns to the same side does not cross either.
    """
    import math

    differences = [y - x for x, y in zip(a, b, strict=True)]
    last = None  # index of the last k where the curves differ
    for i, difference in enumerate(differences):
        if difference == 0:
            continue
        if last is not None and (differences[last] > 0) != (difference > 0):
            if i - last > 1:  # equal in between: they cross where they meet
                return float(ks[last + 1])
            low, high = math.log2(ks[last]), math.log2(ks[i])
            before = differences[last]
            return 2 ** (low + (high - low) * before / (before - difference))
        last = i
    return None


PROTOCOL_FIELDS = ("n", "temperature", "top_p", "top_k", "max_new_tokens", "system_prompt", "user_template",
                   "chat_template", "plain_text_prompts")  # fmt: skip


def protocol_differences(a: dict, b: dict) -> dict[str, tuple]:
    """The sampling and prompt settings in which two evaluations differ (their summaries' `protocol`)."""
    first, second = a.get("protocol") or {}, b.get("protocol") or {}
    return {key: (first.get(key), second.get(key)) for key in PROTOCOL_FIELDS if first.get(key) != second.get(key)}


def solved_at(record: dict, k: int) -> bool:
    """Solved at k: at least one of the k samples is correct with probability above one half."""
    return record.get(f"pass@{k}", 0.0) > 0.5


class ProtocolMismatchError(ValueError):
    """Two runs were sampled under different settings, so their pass@k curves do not measure the same thing."""


def no_crossover(ks: list[int], curve_a: list[float], curve_b: list[float], name_a: str, name_b: str) -> str:
    """What to say when the curves never cross: tied everywhere, or which run is ahead (and where they meet)."""
    span = f"k in {ks[0]}..{ks[-1]}"
    differences = [y - x for x, y in zip(curve_a, curve_b, strict=True)]
    if all(difference == 0 for difference in differences):
        return f"Crossover: none: the curves are identical (tied at every {span}); neither run is ahead."
    leader = name_b if any(difference > 0 for difference in differences) else name_a
    level = [k for k, difference in zip(ks, differences, strict=True) if difference == 0]
    tied = f", level at k = {', '.join(map(str, level))}" if level else ""
    return f"Crossover: none for {span}: {leader} stays ahead{tied}."


def compare(run_a: Path, run_b: Path, output: Path, allow_protocol_mismatch: bool = False) -> str:
    """Write and return the report; refuses runs sampled under different protocols unless allowed (then warns)."""
    return write_comparison(run_a, run_b, output, allow_protocol_mismatch)[0]


def write_comparison(
    run_a: Path, run_b: Path, output: Path, allow_protocol_mismatch: bool = False
) -> tuple[str, list[Path]]:
    """`compare`, returning also the files written (compare.md first, then one plot per dataset)."""
    a, b = load_run(run_a), load_run(run_b)
    mismatches = {
        dataset: differences
        for dataset in sorted(set(a) & set(b))
        if (differences := protocol_differences(a[dataset]["summary"], b[dataset]["summary"]))
    }
    if mismatches and not allow_protocol_mismatch:
        dataset, differences = next(iter(mismatches.items()))
        detail = "; ".join(f"{key}: {x!r} vs {y!r}" for key, (x, y) in differences.items())
        raise ProtocolMismatchError(
            f"{run_a} and {run_b} were evaluated under different protocols on {dataset} ({detail}): their pass@k is "
            "not comparable; evaluate both alike, or pass --allow-protocol-mismatch to compare anyway"
        )
    output.mkdir(parents=True, exist_ok=True)
    lines = [f"# {run_a.name} vs {run_b.name}", ""]
    plots = []
    for dataset in sorted(set(a) & set(b)):
        sa, sb = a[dataset]["summary"], b[dataset]["summary"]
        if dataset in mismatches:
            detail = "; ".join(f"{key}: {x!r} vs {y!r}" for key, (x, y) in mismatches[dataset].items())
            lines += [f"**Warning: different protocols on {dataset}** ({detail}); the curves are not comparable.", ""]
        ks = common_ks(sa, sb)
        curve_a = [sa["metrics"][f"pass@{k}"]["mean"] for k in ks]
        curve_b = [sb["metrics"][f"pass@{k}"]["mean"] for k in ks]
        plots.append(output / f"pass_at_k_{dataset}.png")
        plot_pass_at_k({run_a.name: sa, run_b.name: sb}, ks, plots[-1], dataset)
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
        header = f"| k | {run_a.name} | {run_b.name} | difference | paired difference, {len(shared)} problems |"
        lines += [header, "|---:|---:|---:|---:|---:|"]
        for k, x, y in zip(ks, curve_a, curve_b, strict=True):
            low_a, high_a = sa["metrics"][f"pass@{k}"]["ci95"]
            low_b, high_b = sb["metrics"][f"pass@{k}"]["ci95"]
            gain, (low, high), _ = paired_difference(
                *({pid: run[dataset]["problems"][pid].get(f"pass@{k}", 0.0) for pid in shared} for run in (a, b))
            )
            lines.append(
                f"| {k} | {x:.3f} [{low_a:.3f}, {high_a:.3f}] | {y:.3f} [{low_b:.3f}, {high_b:.3f}] | {y - x:+.3f} "
                f"| {gain:+.3f} [{low:+.3f}, {high:+.3f}] |"
            )
        lines += [
            "",
            "Paired difference: the mean over shared problems of (b - a) per problem, with a bootstrap "
            "interval of those differences; it excludes 0 when the gain or loss is beyond resampling noise.",
            "",
        ]
        lines.append(
            f"Crossover: the curves cross near k = {cross:.1f}." if cross is not None
            else no_crossover(ks, curve_a, curve_b, run_a.name, run_b.name)
        )  # fmt: skip
        lines.append(f"At k = {top}: solved only by {run_a.name}: {len(only_a)}; only by {run_b.name}: {len(only_b)}.")
        if only_a or only_b:
            lines.append(f"- only {run_a.name}: {', '.join(only_a[:20])}{' ...' if len(only_a) > 20 else ''}")
            lines.append(f"- only {run_b.name}: {', '.join(only_b[:20])}{' ...' if len(only_b) > 20 else ''}")
        lines.append("")
    if len(lines) == 2:
        raise SystemExit(f"{run_a} and {run_b} share no dataset")
    report = "\n".join(lines)
    write_atomic(output / "compare.md", report + "\n")
    return report, [output / "compare.md", *plots]


def main(argv: list[str] | None = None) -> str:
    parser = FlagParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_a", type=Path)
    parser.add_argument("run_b", type=Path)
    parser.add_argument("--output", type=Path, default=None, help="default: <run_b>/compare_<run_a name>")
    parser.add_argument(
        "--allow-protocol-mismatch",
        action="store_true",
        help="compare runs sampled under different settings (n, temperature, top-p, max tokens, template)",
    )
    args = parser.parse_args(argv)
    output = args.output or args.run_b / f"compare_{args.run_a.name}"
    try:
        report, written = write_comparison(args.run_a, args.run_b, output, args.allow_protocol_mismatch)
    except ProtocolMismatchError as error:
        sys.stderr.write(f"error: {error}\n")
        raise SystemExit(2) from None
    print(report)
    print(f"written: {', '.join(map(str, written))}")
    return report


if __name__ == "__main__":
    main()
