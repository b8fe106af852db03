"""Benchmark: the math_accuracy reward against a plain math-verify loop, side by side in one run.

    python scripts/bench/bench_rewards.py [--data-dir ../shared/data/math] [--limit 6000]

Completions are built from the real gold answers of the shared math sets (AIME, AMC, MATH-500 and
MATH train): correct ones (the gold boxed at the end of a short reasoning), wrong ones (another
problem's answer, or the gold plus one), malformed ones (no box, an unbalanced box, two candidates)
and a few pathological ones (power towers, huge factorials). Printed: completions per second of
`math_accuracy` (exact fast path + worker pool, 2 s hard timeout per item) and of an in-process loop
of math-verify `parse` + `verify` with its default settings, their ratio, how often they disagree, and
the worst single-item latency of each on the adversarial corpus of tests/data.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script from a checkout that is not installed
    sys.path.insert(0, str(REPO))

from rewards.math import math_accuracy, verify, verify_batch  # noqa: E402
from scripts.bench.adversarial_corpus import load_corpus  # noqa: E402

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


def plain_math_verify(gold: str, completion: str) -> bool:
    from math_verify import parse
    from math_verify import verify as mv_verify

    return bool(mv_verify(parse(f"${gold}$"), parse(completion)))


def run(args) -> dict:
    golds, completions = build_completions(load_golds(args.data_dir), args.limit)
    verify("\\sqrt{2}", "\\boxed{\\sqrt{2}}")  # start the worker pool before timing (a one-time boot)

    started = time.perf_counter()
    ours = math_accuracy(completions, answer=golds)
    ours_s = time.perf_counter() - started

    started = time.perf_counter()
    plain = [plain_math_verify(gold, completion) for gold, completion in zip(golds, completions, strict=True)]
    plain_s = time.perf_counter() - started

    differing = [i for i, (a, b) in enumerate(zip(ours, plain, strict=True)) if bool(a) != b]
    reasons = verify_batch([golds[i] for i in differing], [completions[i] for i in differing])  # cached: cheap
    why = Counter(
        f"ours {bool(ours[i])}, plain {plain[i]}: {verdict.reason}"
        for i, verdict in zip(differing, reasons, strict=True)
    )
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
    return {
        "completions": len(completions),
        "ours_per_s": len(completions) / ours_s,
        "plain_per_s": len(completions) / plain_s,
        "disagreements": why,
        "worst_ours": worst_ours,
        "worst_plain": worst_plain,
        "corpus": len(corpus),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data" / "math")
    parser.add_argument("--limit", type=int, default=6000, help="number of completions (default 6000)")
    args = parser.parse_args(argv)
    logging.getLogger("math_verify").setLevel(logging.CRITICAL)  # it logs every timeout with the whole input
    if not args.data_dir.is_dir():
        raise SystemExit(f"{args.data_dir} not found: pass --data-dir with aime24/amc/math500/math_train .jsonl files")
    result = run(args)
    print(f"math_accuracy vs plain math-verify loop, {result['completions']} completions from the shared math sets")
    print("| verifier | completions/s | worst latency on the adversarial corpus |")
    print("|---|---:|---:|")
    print(f"| math_accuracy (exact path + worker pool, 2 s timeout) | {result['ours_per_s']:.0f} | "
          f"{result['worst_ours'][0]:.2f} s ({result['worst_ours'][1]}) |")  # fmt: skip
    print(f"| math-verify parse + verify, in-process loop | {result['plain_per_s']:.0f} | "
          f"{result['worst_plain'][0]:.2f} s ({result['worst_plain'][1]}) |")  # fmt: skip
    print(f"ratio: {result['ours_per_s'] / result['plain_per_s']:.1f}x")
    print(f"verdicts that differ: {sum(result['disagreements'].values())}, by our reason:")
    for reason, count in result["disagreements"].most_common():
        print(f"  {count:5d}  {reason}")
    return result


if __name__ == "__main__":
    main()
