"""Benchmark: the math_accuracy reward against a plain math-verify loop, side by side in one run, on two mixes.

    python scripts/bench/bench_rewards.py [--data-dir ../shared/data/math] [--limit 6000] [--realistic 2000]

* synthetic mix: completions built from the real gold answers of the shared math sets (AIME, AMC,
  MATH-500 and MATH train): correct ones (the gold boxed after a short reasoning), wrong ones (another
  problem's answer, or the gold plus one), malformed ones (no box, an unbalanced box, two candidates)
  and 0.5% pathological ones (power towers, huge factorials), which dominate the baseline's time;
* realistic mix: human-written MATH solutions (math_train_solutions.jsonl) scored as a GRPO group of 8
  per problem: 3 copies of the problem's own solution (correct), 2 with one character of the final box
  edited and 3 solutions of other problems (wrong).

Printed for each: completions per second of `math_accuracy` (local decisions + a pool of math-verify
worker processes, 2 of them on a 2-core machine, 2 s hard timeout per item) and of an in-process loop
of math-verify `parse` + `verify` (gold wrapped in `$...$`), their ratio, and how often they disagree;
then the worst single-item latency of each on the adversarial corpus of tests/data.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

from rewards.math import math_accuracy, start_workers, verify, verify_batch  # noqa: E402
from rewards.math.pool import shared_pool  # noqa: E402
from scripts.bench.adversarial_corpus import load_corpus  # noqa: E402
from scripts.bench.written_solutions import math_solutions, one_edit  # noqa: E402

SETS = ("aime24.jsonl", "amc.jsonl", "math500.jsonl", "math_train.jsonl")
PATHOLOGICAL = ["\\boxed{9^{9^{9^{9}}}}", "\\boxed{100000!}", "\\boxed{" + "{" * 300 + "1" + "}" * 300 + "}"]


def load_golds(data_dir: Path) -> list[str]:
    golds = []
    for name in SETS:
        for line in (data_dir / name).read_text().splitlines():
            answer = json.loads(line).get("answer")
            if answer is not None:
                golds.append(str(answer))
    return golds


def build_completions(golds: list[str], limit: int, seed: int = 0) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    pairs = []
    while len(pairs) < limit:
        gold = rng.choice(golds)
        kind = rng.random()
        if kind < 0.45:
            completion = f"<think>\nLet me work it out step by step.\n</think>\nThe answer is $\\boxed{{{gold}}}$."
        elif kind < 0.65:
            completion = f"<think>\nSo it is this.\n</think>\n\\boxed{{{rng.choice(golds)}}}"
        elif kind < 0.80:
            completion = f"Thus we get \\boxed{{{gold} + 1}}."
        elif kind < 0.88:
            completion = f"The answer is {gold}."
        elif kind < 0.94:
            completion = f"\\boxed{{{gold}"
        elif kind < 0.995:
            completion = f"\\boxed{{{gold}}} or maybe \\boxed{{{rng.choice(golds)}}}"
        else:
            completion = rng.choice(PATHOLOGICAL)
        pairs.append((gold, completion))
    return [gold for gold, _ in pairs], [completion for _, completion in pairs]


def realistic_completions(data_dir: Path, limit: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """GRPO-like groups of 8 written solutions per gold: 3 correct, 2 edited, 3 from other problems."""
    rng = random.Random(seed)
    solutions = math_solutions(data_dir)
    golds, completions = [], []
    while len(completions) < limit:
        solution = rng.choice(solutions)
        edited = one_edit(solution.text) or solution.text + "\\boxed{0}"
        group = [solution.text] * 3 + [edited] * 2 + [rng.choice(solutions).text for _ in range(3)]
        golds += [solution.gold] * len(group)
        completions += group
    return golds[:limit], completions[:limit]


def plain_math_verify(gold: str, completion: str) -> bool:
    from math_verify import parse
    from math_verify import verify as mv_verify

    return bool(mv_verify(parse(f"${gold}$"), parse(completion)))


def side_by_side(golds: list[str], completions: list[str]) -> dict:
    """Both verifiers on the same completions, timed one after the other."""
    started = time.perf_counter()
    ours = math_accuracy(completions, answer=golds)
    ours_s = time.perf_counter() - started

    started = time.perf_counter()
    plain = []
    for gold, completion in zip(golds, completions, strict=True):
        try:
            plain.append(plain_math_verify(gold, completion))
        except Exception:  # noqa: BLE001 - plain math-verify may raise on hostile input
            plain.append(False)
    plain_s = time.perf_counter() - started

    differing = [i for i, (a, b) in enumerate(zip(ours, plain, strict=True)) if bool(a) != b]
    reasons = verify_batch([golds[i] for i in differing], [completions[i] for i in differing])  # cached: cheap
    why = Counter(
        f"ours {bool(ours[i])}, plain {plain[i]}: {verdict.reason}"
        for i, verdict in zip(differing, reasons, strict=True)
    )
    return {
        "completions": len(completions),
        "ours_per_s": len(completions) / ours_s,
        "plain_per_s": len(completions) / plain_s,
        "ours_correct": sum(score == 1.0 for score in ours),
        "plain_correct": sum(plain),
        "disagreements": why,
    }


def worst_latency() -> tuple[tuple[float, str], tuple[float, str], int]:
    corpus = [row for row in load_corpus() if row["gold"] is not None and row["completion"] is not None]
    worst_ours, worst_plain = (0.0, ""), (0.0, "")
    for row in corpus:
        started = time.perf_counter()
        verify(row["gold"], row["completion"])
        worst_ours = max(worst_ours, (time.perf_counter() - started, row["name"]))
        started = time.perf_counter()
        try:
            plain_math_verify(row["gold"], row["completion"])
        except Exception:  # noqa: BLE001 - plain math-verify may raise on hostile input; we only time it
            pass
        worst_plain = max(worst_plain, (time.perf_counter() - started, row["name"]))
    return worst_ours, worst_plain, len(corpus)


def run(args) -> dict:
    start_workers()  # boot the worker pool before timing (a one-time cost)
    mixes = {"synthetic": side_by_side(*build_completions(load_golds(args.data_dir), args.limit))}
    if args.realistic:
        mixes["realistic"] = side_by_side(*realistic_completions(args.data_dir, args.realistic))
    worst_ours, worst_plain, corpus = worst_latency()
    return {"mixes": mixes, "worst_ours": worst_ours, "worst_plain": worst_plain, "corpus": corpus}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data" / "math")
    parser.add_argument("--limit", type=int, default=6000, help="synthetic completions (default 6000)")
    parser.add_argument(
        "--realistic", type=int, default=2000, help="written-solution completions (default 2000; 0: skip)"
    )
    args = parser.parse_args(argv)
    logging.getLogger("math_verify").setLevel(logging.CRITICAL)  # it logs every timeout with the whole input
    if not args.data_dir.is_dir():
        raise SystemExit(f"{args.data_dir} not found: pass --data-dir with aime24/amc/math500/math_train .jsonl files")
    result = run(args)
    workers = shared_pool().size
    print(f"math_accuracy (local decisions + {workers} math-verify worker processes, 2 s timeout per item) vs an")
    print("in-process math-verify parse + verify loop (gold wrapped in $...$), the same completions, one run")
    print("| mix | completions | math_accuracy /s | math-verify loop /s | ratio | correct (ours / plain) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, mix in result["mixes"].items():
        print(f"| {name} | {mix['completions']} | {mix['ours_per_s']:.0f} | {mix['plain_per_s']:.0f} | "
              f"{mix['ours_per_s'] / mix['plain_per_s']:.1f}x | {mix['ours_correct']} / {mix['plain_correct']} |")  # fmt: skip
    for name, mix in result["mixes"].items():
        print(f"ratio ({name}): {mix['ours_per_s'] / mix['plain_per_s']:.1f}x")
    print(f"worst latency on the adversarial corpus ({result['corpus']} items): math_accuracy "
          f"{result['worst_ours'][0]:.2f} s ({result['worst_ours'][1]}), math-verify loop "
          f"{result['worst_plain'][0]:.2f} s ({result['worst_plain'][1]})")  # fmt: skip
    for name, mix in result["mixes"].items():
        print(f"{name}: verdicts that differ: {sum(mix['disagreements'].values())}, by our reason:")
        for reason, count in mix["disagreements"].most_common():
            print(f"  {count:5d}  {reason}")
    return result


if __name__ == "__main__":
    main()
