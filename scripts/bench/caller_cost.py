"""Benchmark: what a sandboxed program's output costs the process that judges it (issue 58).

    python scripts/bench/caller_cost.py [--completions 8] [--cases 4] [--repeats 3] [--old-rev b6ef81d]

Every run's own CPU time is bounded by its budget; what the caller (the trainer, under the GIL) spends reading
and comparing the program's output is not, so it must be bounded by what the caller expects, not by what the
program prints. Three programs, each as `--completions` completions of one stdin/stdout row with `--cases`
cases through `code_pass_rate`: a short answer, 499,999 short lines (just under the 1 MB output cap) and one
line of 999,999 characters. The figure is the caller's own CPU time (user + system of its process, its
threads included, its children not: they are the runs, inside their budgets), measured in a fresh
interpreter per figure, the least of `--repeats` kept; the implementation at `--old-rev` (taken from git into
a temporary folder) is measured beside this checkout's in the same run, alternating which goes first.
Printed: a table, then for each implementation the flood's cost over the short answer's (target: at most 2x).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from scripts.bench.bench_code import REPO, extract_old, measure_in  # the old rewards/ from git; a fresh interpreter

PROGRAMS = {
    "short answer": "import sys\nsys.stdin.read()\nprint(42)",
    "499,999 lines": "import sys\nsys.stdout.write('7\\n' * 499_999)",
    "one 1 MB line": "import sys\nsys.stdout.write('7' * 999_999)",
}

MEASURE = r"""
import json, resource, sys
from rewards import get_reward
program, completions, cases = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
reward = get_reward("code_pass_rate", timeout_s=5.0)
tests = json.dumps({"inputs": ["1 2\n"] * cases, "outputs": ["42\n"] * cases})
reward(["```python\nprint(42)\n```"], tests=[tests])  # warm: the sandbox's root, the seccomp filter
def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
before = cpu()
scores = reward(["```python\n" + program + "\n```"] * completions, tests=[tests] * completions)
print(json.dumps({"caller_cpu_s": cpu() - before, "scores": scores}))
"""


def measure(root: Path, program: str, args: argparse.Namespace) -> dict:
    return measure_in(root, MEASURE, program, str(args.completions), str(args.cases), timeout=600)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--completions", type=int, default=8, help="completions of the row, each the same program")
    parser.add_argument("--cases", type=int, default=4, help="stdin/stdout cases of the row")
    parser.add_argument("--repeats", type=int, default=3, help="fresh interpreters per figure; the least counts")
    parser.add_argument("--old-rev", default="b6ef81d", help="the commit to measure beside this checkout")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="rlvr-bench-caller-") as scratch:
        roots = {args.old_rev: extract_old(args.old_rev, Path(scratch)), "this checkout": REPO}
        best: dict[tuple[str, str], float] = {}
        for repeat in range(args.repeats):
            for name in list(roots)[:: 1 if repeat % 2 == 0 else -1]:
                for label, program in PROGRAMS.items():
                    result = measure(roots[name], program, args)
                    if label == "short answer" and result["scores"] != [1.0] * args.completions:
                        raise RuntimeError(f"the short answer did not pass in {name}: {result['scores']}")
                    key = (name, label)
                    best[key] = min(best.get(key, float("inf")), result["caller_cpu_s"])
    runs = args.completions * args.cases
    print(f"{args.completions} completions x {args.cases} cases = {runs} runs per figure; least of {args.repeats}\n")
    print("| implementation | program | caller CPU s | ms per run | over the short answer |")
    print("|---|---|---:|---:|---:|")
    for name in roots:
        short = best[(name, "short answer")]
        for label in PROGRAMS:
            cpu = best[(name, label)]
            print(f"| {name} | {label} | {cpu:.3f} | {1000 * cpu / runs:.1f} | {cpu / short:.2f}x |")
    print()
    for name in roots:
        worst = max(best[(name, label)] for label in PROGRAMS if label != "short answer")
        print(
            f"ratio {name} (the worst flood's caller CPU / the short answer's): {worst / best[(name, 'short answer')]:.2f}x"
        )


if __name__ == "__main__":
    main()
