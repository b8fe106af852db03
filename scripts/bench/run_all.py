"""Run every benchmark under scripts/bench and gather their headline ratios into one table.

    python scripts/bench/run_all.py                      # all of them (about an hour and a half on 2 cores)
    python scripts/bench/run_all.py --only bench_rewards bench_eval  # some of them
    python scripts/bench/run_all.py --skip sample_efficiency

Each benchmark runs in its own process (one at a time: they measure speed) with its own defaults; its
whole output goes to artifacts/bench/<name>.txt as it is produced, and artifacts/bench/results.md holds
one row per benchmark: what it compares, the ratio line(s) it printed, its wall time and exit status.
A benchmark that fails or needs what is absent (the shared math sets, HumanEval) is reported as such and
the others still run. The table is rewritten after every benchmark, so an interrupted run keeps what it has.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

# What each benchmark compares, for the table. A new file under scripts/bench runs too, described by its
# docstring's first line.
DESCRIPTIONS = {
    "bench_rewards": "math_accuracy vs a plain math-verify loop: completions/s and worst latency",
    "bench_code": "code sandbox: programs/s with the sound judge of issue 15 vs the harness before it",
    "bench_eval": "batched sampler vs one generate() per sample: completions/s",
    "grpo_overhead": "recipes/grpo.py's trainer vs bare trl.GRPOTrainer: s/step (target <= 1.05)",
    "sample_efficiency": "GRPO, DAPO, ablations and controls over seeds: held-out pass@1 vs completions sampled",
    "tool_cost": "a python-tool call vs plain python -c (target <= 2x); a tool-using GRPO step's timing_s/tools",
    "tool_sampling": "sampling with tools: TRL's generate a problem a batch vs batched, eval.decoding, shared prefixes",
    "tool_arms": "what tools buy SmolLM2 on arithmetic-hard: tool DAPO vs text DAPO, SFT and RFT on tool traces",
}


# Modules here that are not benchmarks: this runner, the adversarial corpus reader bench_rewards uses,
# sample_efficiency's runs and statistics, and length_penalty's report.
NOT_BENCHMARKS = (
    "run_all", "__init__", "adversarial_corpus", "sample_efficiency_runs", "sample_efficiency_stats",
    "length_penalty_report", "emergence_measures", "tool_arms_report",
)  # fmt: skip


def benchmarks() -> list[str]:
    return sorted(path.stem for path in HERE.glob("*.py") if path.stem not in NOT_BENCHMARKS)


def headline(output: str) -> str:
    """The lines a reader wants: the ratios; for a benchmark without one, its table's last rows."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    ratios = [line for line in lines if line.lower().startswith("ratio")]
    if ratios:
        return "<br>".join(ratios)
    table = [line for line in lines if line.startswith("|") and not set(line) <= set("|-: ")]
    return "<br>".join(table[-4:]) if table else (lines[-1] if lines else "(no output)")


def run_one(name: str, out_dir: Path, extra: list[str]) -> dict:
    log = out_dir / f"{name}.txt"
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    env.setdefault("OMP_NUM_THREADS", "1")
    started = time.time()
    print(f"== {name}: output in {log}", flush=True)
    with open(log, "w") as handle:
        process = subprocess.Popen(
            [sys.executable, str(HERE / f"{name}.py"), *extra],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for line in process.stdout:  # shown and saved as it comes: a long benchmark shows its progress
            handle.write(line)
            handle.flush()
            if not line.startswith(("\r",)) and "it/s]" not in line and "s/it]" not in line:
                sys.stdout.write(f"  {line}")
        returncode = process.wait()
    output = log.read_text()
    return {
        "name": name,
        "seconds": time.time() - started,
        "returncode": returncode,
        "headline": headline(output) if returncode == 0 else f"failed (exit {returncode}); see {log.name}",
    }


def write_table(results: list[dict], path: Path) -> None:
    lines = [
        "# Benchmarks",
        "",
        f"`python scripts/bench/run_all.py` on {os.cpu_count()} cores, {time.strftime('%Y-%m-%d %H:%M')}. "
        "Each benchmark's full output is in the .txt file of its name.",
        "",
        "| benchmark | compares | result | wall s |",
        "|---|---|---|---:|",
    ]
    for result in results:
        description = DESCRIPTIONS.get(result["name"]) or _docstring_line(result["name"])
        lines.append(
            f"| `{result['name']}` | {description} | {result['headline'].replace('|', '/')} | {result['seconds']:.0f} |"
        )
    path.write_text("\n".join(lines) + "\n")


def _docstring_line(name: str) -> str:
    import ast

    doc = ast.get_docstring(ast.parse((HERE / f"{name}.py").read_text())) or ""
    return doc.splitlines()[0] if doc else ""


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", default=None, help="run only these benchmarks")
    parser.add_argument("--skip", nargs="+", default=[], help="leave these out")
    parser.add_argument("--output-dir", type=Path, default=REPO / "artifacts" / "bench")
    parser.add_argument(
        "--args",
        action="append",
        default=[],
        metavar="NAME=ARGS",
        help="extra arguments for one benchmark, e.g. --args 'sample_efficiency=--fast'",
    )
    args = parser.parse_args(argv)
    names = benchmarks()
    unknown = sorted((set(args.only or []) | set(args.skip)) - set(names))
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; available: {names}")
    chosen = [name for name in (args.only or names) if name not in args.skip]
    extra = {}
    for item in args.args:
        name, _, value = item.partition("=")
        extra[name] = value.split()
    args.output_dir.mkdir(parents=True, exist_ok=True)
    results = []
    for name in chosen:
        results.append(run_one(name, args.output_dir, extra.get(name, [])))
        write_table(results, args.output_dir / "results.md")
    print((args.output_dir / "results.md").read_text())
    return results


if __name__ == "__main__":
    main()
