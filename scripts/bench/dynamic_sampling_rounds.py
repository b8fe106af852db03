"""Groups generated per group kept by each dynamic sampling mode, simulated: what the sizing rules can save.

    python scripts/bench/dynamic_sampling_rounds.py [--target 8] [--max_rounds 3] [--steps 4000]

No model: each generated group is zero-variance with probability z, independently, and each mode's rules
(recipes/stages/grpo/dynamic_sampling.py; adaptive through its own `adaptive_round_size` and
`update_zero_std_estimate`) decide how many groups a step generates. Filtering alone cannot do better than
1 / (1 - z) groups per kept group, which adaptive reaches by keeping its surplus, so the most it can save
against `batch` is the surplus `batch` discards. Read the training runs (scripts/bench/sample_efficiency.py)
for what a real policy, whose z moves as it learns, does.
"""

from __future__ import annotations

import argparse
import random

from recipes.stages.grpo.dynamic_sampling import (
    GENERATION_MULTIPLE,
    adaptive_round_size,
    update_zero_std_estimate,
)


def whole_batches(z: float, multiple: int, args, rng: random.Random) -> float:
    """`batch` (multiple 1) and `reference` (multiple 3): rounds of multiple x target groups, surplus dropped."""
    generated = kept = 0
    for _ in range(args.steps):
        with_variance = 0
        for _round in range(args.max_rounds + 1):
            size = multiple * args.target
            with_variance += sum(rng.random() >= z for _ in range(size))
            generated += size
            if with_variance >= args.target:
                break
        kept += min(with_variance, args.target)
    return generated / kept


def adaptive(z: float, args, rng: random.Random) -> float:
    generated = kept = buffer = 0
    estimate = None
    for _ in range(args.steps):
        used, with_variance, zero, total, rounds = min(buffer, args.target), 0, 0, 0, 0
        while rounds <= args.max_rounds:
            missing = args.target - used - with_variance
            size = adaptive_round_size(missing, zero / total if total else estimate, GENERATION_MULTIPLE * args.target)
            if size == 0:
                break
            got = sum(rng.random() >= z for _ in range(size))
            with_variance, zero, total, rounds = with_variance + got, zero + size - got, total + size, rounds + 1
        generated += total
        need = args.target - used
        kept += used + min(with_variance, need)
        buffer = max(with_variance - need, 0)
        if total:
            estimate = update_zero_std_estimate(estimate, zero / total)
    return generated / kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", type=int, default=8, help="groups per step (demo: 8 prompts)")
    parser.add_argument("--max_rounds", type=int, default=3, help="dynamic_sampling_max_rounds (demo: 3)")
    parser.add_argument("--steps", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    print("| zero-variance share z | floor 1/(1-z) | batch | reference | adaptive | batch / adaptive |")
    print("|---:|---:|---:|---:|---:|---:|")
    for z in (0.3, 0.5, 0.6, 0.7, 0.8, 0.9):
        per_kept = (
            whole_batches(z, 1, args, rng),
            whole_batches(z, GENERATION_MULTIPLE, args, rng),
            adaptive(z, args, rng),
        )
        print(
            f"| {z} | {1 / (1 - z):.2f} | "
            + " | ".join(f"{value:.2f}" for value in per_kept)
            + f" | {per_kept[0] / per_kept[2]:.2f} |"
        )


if __name__ == "__main__":
    main()
