"""The whole R1 pipeline in miniature, on a CPU: every stage run by the repo's own recipes, every stage evaluated
with one protocol, and a report.

    make demo                                   # or: python scripts/demo.py
    python scripts/demo.py --control random-reward   # add the RL stage trained on a coin-flip reward
    python scripts/demo.py --fast               # a smoke run in about a minute (the test suite runs it)
    python scripts/demo.py --seeds 0 1 2        # once per seed into artifacts/demo/seed<k>/, then every figure
                                                # as mean ± std across seeds (artifacts/demo/seeds_report.md)

Stages, each writing a folder under --output-dir (default artifacts/demo):

    base      the tiny embedded model, untrained                 recipes/common/model/tiny.py
    sft       cold-start SFT on the easy levels 1-4              recipes/sft.py, configs/demo/sft.yaml
    filter    pass-rate filter of the RL pool (levels 1-10) with the cold-start model: only problems it
              solves sometimes, never always or never             python -m data_filters (data_filters/pipeline.py)
    dapo      DAPO on the filtered pool (dynamic sampling, clip-higher, overlong shaping)
                                                                  recipes/grpo.py, configs/demo/dapo.yaml
    rs        one rejection-sampling round from the DAPO model    recipes/rejection_sampling.py
    distill   offline distillation of the final model into a smaller, untrained student
                                                                  recipes/distill.py
    control   (--control random-reward) the DAPO stage with a random 0/1 reward in place of the verifier

The filter runs after the cold start, not on the base model: pass rates are the policy's own (Kimi k1.5,
Qwen3), and the untrained base solves nothing. Every model is evaluated on the same held-out problems
(the synthetic task's eval split, levels 1-12) with the same sampling protocol; the evaluation is
eval/evaluate.py's, so the report's numbers are those a user gets from `python -m eval.evaluate`.

A stage whose output exists is skipped (a rerun only redoes what is missing; --force redoes all).
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from demo_report import level_stats, plot_training, summarize_stages, verdicts, write_report  # noqa: E402, F401
from demo_stages import EVAL_LEVELS, RL_POOL, STAGE_NAMES, Demo  # noqa: E402, F401  (what the tests read)

from recipes.common.command_line.config import setup_logging  # noqa: E402

logger = logging.getLogger("demo")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output-dir", type=Path, default=REPO / "artifacts" / "demo")
    parser.add_argument("--seed", type=int, default=None, help="the training seed of a one-seed run (default 0)")
    parser.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        default=None,
        help="run the demo once per seed into <output-dir>/seed<k>/ (a finished seed is skipped), then report every "
        "figure as mean ± std across seeds with each seed's bootstrap interval (scripts/demo_seeds.py)",
    )
    parser.add_argument(
        "--fast", action="store_true", help="tiny budgets everywhere: checks the plumbing, not learning"
    )
    parser.add_argument("--force", action="store_true", help="redo every stage even when its output exists")
    parser.add_argument(
        "--control",
        choices=("random-reward",),
        action="append",
        default=[],
        help="add a control stage: random-reward trains the RL stage on a coin flip instead of the verifier",
    )
    parser.add_argument("--eval-problems", type=int, default=None, help="held-out problems per level (default 16)")
    parser.add_argument("--eval-samples", type=int, default=None, help="samples per problem (default 16)")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch CPU threads of the main line of stages (default: the machine's cores, at most 4); "
        "the second process uses one",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="processes at once (default: 2 when the machine has 2 cores or more): evaluations and the distillation "
        "run beside the training stages, each process on --threads threads",
    )
    parser.add_argument("--rl-pool", default=RL_POOL, help=f"the RL stage's problem pool (default {RL_POOL})")
    parser.add_argument("--pool-problems", type=int, default=80, help="problems per level in the pool before filtering")
    parser.add_argument("--skip", nargs="*", default=[], choices=("rs", "distill"), help="leave out these stages")
    args = parser.parse_args(argv)
    if args.seeds is not None and len(set(args.seeds)) != len(args.seeds):
        parser.error(f"--seeds lists a seed twice: {args.seeds}")
    if args.seeds is not None and args.seed is not None:
        parser.error("--seed and --seeds together: --seeds runs each of its seeds")
    args.seed = 0 if args.seed is None else args.seed
    return args


def main(argv: list[str] | None = None) -> dict:
    """The one-seed demo (its stage table), or with --seeds the demo per seed and the table over seeds."""
    args = parse_args(argv)
    setup_logging()
    if args.seeds:
        from demo_seeds import run_seeds

        return run_seeds(args, run_one_seed)
    return run_one_seed(args)


def run_one_seed(args: argparse.Namespace) -> dict:
    """Every stage for `args.seed` into `args.output_dir`, then its report; returns the stage table."""
    import torch

    cores = os.cpu_count() or 1
    args.jobs = max(1, args.jobs or min(2, cores))
    # the main line of stages takes every core; what runs beside it, one thread (it mostly waits for the main line)
    args.threads = args.threads or max(1, min(4, cores))
    args.background_threads = 1 if args.jobs > 1 else args.threads
    torch.set_num_threads(args.threads)
    started = time.time()
    demo = Demo(args)
    run = demo.run()
    minutes = (time.time() - started) / 60
    text = write_report(demo, run, minutes, args.threads + (args.jobs - 1) * args.background_threads)
    print("\n" + text + f"\nreport: {demo.out / 'report.md'}  ({minutes:.1f} min)")
    return summarize_stages(run["results"], demo.eval_samples)


if __name__ == "__main__":
    main()
