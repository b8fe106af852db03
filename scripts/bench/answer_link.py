"""Benchmark: does a model's boxed answer say what its own working computed? Splits a pass@1 on worked arithmetic
into the working (is the last computed result right?) and the link from working to answer (is it what was boxed?).

    python scripts/bench/answer_link.py      # every evaluation of demo-real and of real_model_arms.py there is
    python scripts/bench/answer_link.py artifacts/demo-real/eval/sft artifacts/bench/real_model_arms/eval/random_reward_s0

For each eval.evaluate run folder (each finished dataset's samples.jsonl and per_problem.jsonl), over all samples:
    right               the verifier's verdict (the run's pass@1)
    boxed = working     the extracted answer is the last result the text computed (its last "= <number>")
    working right       that last computed result is the reference answer: what the sample would score had it boxed
                        its own result
Meant for tasks whose worked solutions write each step as "... = <result>" (the arithmetic task's); elsewhere the
last two columns measure nothing. A model that computes well and boxes something else has lost the link, not the
arithmetic; eval.evaluate's pass@1 cannot tell the two apart.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from eval.compare import load_run

REPO = Path(__file__).resolve().parents[2]
DEFAULT_RUNS = (REPO / "artifacts" / "demo-real" / "eval", REPO / "artifacts" / "bench" / "real_model_arms" / "eval")
RESULT = re.compile(r"=\s*(-?\d+(?:\.\d+)?)")


def same_number(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return False
    try:
        return float(a) == float(b)
    except ValueError:
        return a.strip() == b.strip()


def answer_link(folder: Path) -> dict:
    counts = {"samples": 0, "right": 0, "boxed_is_working": 0, "working_right": 0}
    for dataset, run in load_run(folder).items():  # eval.evaluate writes each dataset one folder down
        gold = {pid: str(record["answer"]) for pid, record in run["problems"].items()}
        for line in (folder / dataset / "samples.jsonl").read_text().splitlines():
            sample = json.loads(line)
            results = RESULT.findall(sample.get("text") or "")
            working = results[-1] if results else None
            counts["samples"] += 1
            counts["right"] += bool(sample.get("correct"))
            counts["boxed_is_working"] += same_number(working, sample.get("extracted"))
            counts["working_right"] += same_number(working, gold.get(sample["id"]))
    total = max(counts["samples"], 1)
    return {"samples": counts["samples"], **{key: value / total for key, value in counts.items() if key != "samples"}}


def name(folder: Path) -> str:
    folder = folder.resolve()
    return str(folder.relative_to(REPO)) if folder.is_relative_to(REPO) else str(folder)


def table(results: dict[str, dict]) -> str:
    lines = ["| run | samples | right | boxed = working | working right |", "|---|---:|---:|---:|---:|"]
    for name, r in results.items():
        lines.append(f"| {name} | {r['samples']} | {r['right']:.3f} | {r['boxed_is_working']:.3f} | "
                     f"{r['working_right']:.3f} |")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="*", type=Path, help="eval.evaluate output folders (default: DEFAULT_RUNS)")
    args = parser.parse_args(argv)
    runs = args.runs or sorted(folder for place in DEFAULT_RUNS for folder in place.glob("*") if folder.is_dir())
    if not runs:
        parser.error(f"no evaluations under {', '.join(map(str, DEFAULT_RUNS))}: give eval.evaluate output folders")
    results = {name(folder): answer_link(folder) for folder in runs}
    print(table(results))
    return results


if __name__ == "__main__":
    main()
