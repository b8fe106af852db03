"""Benchmark: held-out pass@1 against completions sampled, for GRPO, DAPO, their ablations and two controls,
each over several seeds.

    python scripts/bench/sample_efficiency.py [--variants grpo dapo ...] [--seeds 0 1 2] [--steps N]
                                              [--eval-problems P] [--eval-samples S] [--jobs 2] [--dry-run]
    python scripts/bench/sample_efficiency.py --fast      # a smoke run: grpo and dapo, seeds 0 1, a few steps

Every variant trains the same cold-start model with recipes/grpo.py and a demo config plus a few flags (see
VARIANTS): the algorithms (grpo, dr_grpo, dapo, dapo_no_ds), the ablations that ask why DAPO and GRPO differ
(grpo_beta0, dapo_no_clip_higher, dapo_no_overlong, dapo_filter_sum), the controls that ask whether the gain
comes from the verifier (random_reward, format_only) and the dynamic-sampling modes (dapo_ds_*, which need
recipes/grpo.py's --dynamic_sampling_mode). Each runs once per seed, the seed setting training and data order;
the held-out problems and their sampling streams (--eval-seed) are the same for every seed and variant, so
the runs differ only by their weights. The last checkpoint (and every --save-steps one) is evaluated on the
eval split, levels 5-12, --eval-problems per level, --eval-samples samples each at temperature 1. Completions
sampled are read from each step's metrics.jsonl, dynamic sampling's extra rounds included.

Before running, it prints its cost estimate (COSTS, measured on a 2-core machine). --jobs runs that many
(variant, seed) runs side by side, one torch thread each (--threads). Written as results come in (a crash loses
nothing; a rerun skips what is done, and more --seeds or --variants later add only the missing runs):
  <output-dir>/<variant>/seed<k>/          the training run (checkpoints, metrics.jsonl, run_card.json), job.log
  <output-dir>/<variant>/seed<k>/eval.json  pass@1 per checkpoint with per-problem counts, timings
  <output-dir>/cold_start_eval.json        the starting point, shared by all
  --table (default artifacts/bench/sample_efficiency.md) and --plot (default docs/img/sample_efficiency.png),
  rewritten after every run (scripts/bench/sample_efficiency_stats.py: mean ± std across seeds, paired
  comparisons with each variant's parent); a --fast run writes both inside its own output folder instead.

--model defaults to artifacts/demo/sft, the demo's cold-start model; when it is missing, the SFT recipe's
embedded default builds it first (about 5 minutes on two cores).
"""

from __future__ import annotations

import argparse
import logging
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

from scripts.bench.sample_efficiency_runs import (  # noqa: E402
    DEFAULT_VARIANTS,
    DYNAMIC_SAMPLING_OFF,
    EVAL_LEVELS,
    VARIANTS,
    reuse,
    run_child,
    run_job,
)
from scripts.bench.sample_efficiency_stats import write_plot, write_table  # noqa: E402

logger = logging.getLogger("bench.sample_efficiency")

# The cost model behind the estimate printed before a run. Measured with
#   python scripts/bench/sample_efficiency.py --variants grpo dapo format_only random_reward --seeds 0 \
#       --steps 10 --eval-problems 25 --eval-samples 8 --output-dir /tmp/measure
# on the 2-core machine while other jobs kept its load average near 7, so from each job's CPU time (eval.json:
# start_cpu_seconds, train_cpu_seconds, eval_cpu_seconds; one thread, so the wall time it would take on a free
# core), not its wall time (4-5x longer under that load). GRPO 1.43 s/step (the recipe's overhead bench
# measured 1.34 s/step wall for DAPO without dynamic sampling); DAPO 2.05 s/step at 2.9 generation rounds per
# step; format_only 2.37 s/step, every step at the cap of 4 rounds; an evaluation 10.3 s CPU per 1600
# completions. `idle_overhead` scales CPU time to wall time: these constants predict 18.2 min for the one full
# run on record (the single-seed bench, 4 methods x 100 steps and 21 evaluations of 3200 completions, which took
# about 26 min on 2 cores), so the estimate multiplies them by 26 / 18.2.
COSTS = {
    "step_s": 1.43,  # a step without dynamic sampling (8 prompts x 8 samples, generation and update)
    "dynamic_step_s": 2.05,  # a step with dynamic sampling (DAPO's first 10 steps: 2.9 rounds per step)
    "capped_step_s": 2.37,  # a step at the cap of dynamic sampling's rounds (format_only: every group agrees)
    "eval_completion_s": 0.0064,  # one held-out completion (batch 256, up to 96 new tokens)
    "job_start_s": 5.0,  # a run's imports and model loads
    "idle_overhead": 1.43,  # wall time / CPU time of the one full run on record
}
STEP_COST = {**dict.fromkeys(DYNAMIC_SAMPLING_OFF, "step_s"), "format_only": "capped_step_s"}


# ---------------------------------------------------------------- the bench


def launch(name: str, seed: int, args) -> int:
    """Run one job in a child process (a crash there stops only that run); its output goes to job.log."""
    folder = args.output_dir if name == "cold_start" else args.output_dir / name / f"seed{seed}"
    argv = [
        str(Path(__file__).resolve()), "--job", name, str(seed), "--model", str(args.model),
        "--steps", str(args.steps), "--save-steps", str(args.save_steps), "--eval-problems", str(args.eval_problems),
        "--eval-samples", str(args.eval_samples), "--eval-seed", str(args.eval_seed),
        "--output-dir", str(args.output_dir), "--threads", str(args.threads), *(["--fast"] if args.fast else []),
    ]  # fmt: skip
    name_seed = "cold start" if name == "cold_start" else f"{name} seed {seed}"
    log = folder / ("cold_start.log" if name == "cold_start" else "job.log")
    return run_child(argv, log, name_seed, args.threads)


def job_minutes(name: str, args) -> float:
    """The cost model's wall minutes for one job on a free core (COSTS)."""
    evaluate_s = len(EVAL_LEVELS) * args.eval_problems * args.eval_samples * COSTS["eval_completion_s"]
    if name == "cold_start":
        return (COSTS["job_start_s"] + evaluate_s) * COSTS["idle_overhead"] / 60
    per_step = COSTS[STEP_COST.get(name, "dynamic_step_s")]
    evaluations = args.steps // args.save_steps + (1 if args.steps % args.save_steps else 0)
    return (COSTS["job_start_s"] + args.steps * per_step + evaluations * evaluate_s) * COSTS["idle_overhead"] / 60


def estimate_minutes(jobs: list[tuple[str, int]], args) -> float:
    """Wall minutes for `jobs` in order on args.jobs parallel workers (each job to the first one free)."""
    free = [0.0] * max(1, args.jobs)
    for name, _ in jobs:
        first = free.index(min(free))
        free[first] += job_minutes(name, args)
    return max(free)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=REPO / "artifacts" / "demo" / "sft", help="cold-start model")
    parser.add_argument("--variants", nargs="+", default=None, help=f"of {', '.join(VARIANTS)} (default: "
                        f"{' '.join(DEFAULT_VARIANTS)}; fast: grpo dapo)")  # fmt: skip
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="one run per seed (default 0 1 2; fast 0 1)")
    parser.add_argument("--steps", type=int, default=None, help="optimizer steps per run (default 60; fast: 2)")
    parser.add_argument("--save-steps", type=int, default=None, help="checkpoint interval (default: --steps)")
    parser.add_argument("--eval-problems", type=int, default=None, help="held-out problems per level (default 50)")
    parser.add_argument("--eval-samples", type=int, default=None, help="samples per problem (default 8)")
    parser.add_argument("--eval-seed", type=int, default=0, help="held-out problems and their sampling streams")
    parser.add_argument("--jobs", type=int, default=2, help="runs side by side (default 2)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads per run")
    parser.add_argument("--output-dir", type=Path, default=None, help="default artifacts/bench/sample_efficiency")
    parser.add_argument("--table", type=Path, default=None, help="default artifacts/bench/sample_efficiency.md")
    parser.add_argument("--plot", type=Path, default=None, help="default docs/img/sample_efficiency.png")
    parser.add_argument("--fast", action="store_true", help="a smoke run: 2 steps, 1 problem per level")
    parser.add_argument("--dry-run", action="store_true", help="print the runs to do and the estimate, then stop")
    parser.add_argument("--job", nargs=2, metavar=("VARIANT", "SEED"), help=argparse.SUPPRESS)  # one run, internal
    args = parser.parse_args(argv)
    args.steps = args.steps or (2 if args.fast else 60)
    args.save_steps = args.save_steps or args.steps
    args.eval_problems = args.eval_problems or (1 if args.fast else 50)
    args.eval_samples = args.eval_samples or (2 if args.fast else 8)
    args.seeds = args.seeds if args.seeds is not None else ([0, 1] if args.fast else [0, 1, 2])
    chosen = args.variants or (["grpo", "dapo"] if args.fast else DEFAULT_VARIANTS)
    args.variants = list(dict.fromkeys(name.strip() for item in chosen for name in item.split(",") if name.strip()))
    bench = REPO / "artifacts" / "bench"
    args.output_dir = args.output_dir or bench / ("sample_efficiency_fast" if args.fast else "sample_efficiency")
    default_table, default_plot = bench / "sample_efficiency.md", REPO / "docs" / "img" / "sample_efficiency.png"
    if args.fast:  # a smoke run never overwrites the published table and plot
        default_table, default_plot = (
            args.output_dir / "sample_efficiency.md",
            args.output_dir / "sample_efficiency.png",
        )
    args.table, args.plot = args.table or default_table, args.plot or default_plot
    unknown = sorted(set(args.variants) - set(VARIANTS))
    if unknown:
        parser.error(f"unknown variant(s) {unknown}; choose from {', '.join(VARIANTS)}")
    needed = {VARIANTS[name].needs for name in args.variants} - {None}
    if needed and args.job is None:
        import dataclasses

        from recipes.grpo import make_parser

        options = {field.name for kind in make_parser().dataclass_types for field in dataclasses.fields(kind)}
        missing = sorted(needed - options)
        if missing:
            users = [name for name in args.variants if VARIANTS[name].needs in missing]
            parser.error(f"variant(s) {users} need recipes/grpo.py's --{' --'.join(missing)}, which this checkout "
                         "lacks (it comes with the adaptive dynamic sampling of issue 18, item 3)")  # fmt: skip
    if args.steps % args.save_steps:
        logger.warning("--steps is not a multiple of --save-steps: the final model is evaluated as well")
    return args


def load_results(args) -> tuple[dict | None, dict[str, dict[int, dict]]]:
    """The cold start's evaluation and every finished (variant, seed) run on disk, for the chosen ones."""
    start = reuse(args.output_dir / "cold_start_eval.json", args)
    results: dict[str, dict[int, dict]] = {name: {} for name in args.variants}
    for name in args.variants:
        for seed in args.seeds:
            saved = reuse(args.output_dir / name / f"seed{seed}" / "eval.json", args)
            if saved and saved.get("done"):
                results[name][seed] = saved
    return start, results


def report(args) -> None:
    start, results = load_results(args)
    if start is None:
        return
    setup = {"steps": args.steps, "eval_samples": args.eval_samples, "model": args.model, "seeds": args.seeds,
             "levels": f"{EVAL_LEVELS[0]}-{EVAL_LEVELS[-1]}"}  # fmt: skip
    write_table(args.table, results, start, VARIANTS, setup)
    if any(results.values()):
        write_plot(args.plot, results, start, VARIANTS, setup)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    if args.job:
        run_job(args.job[0], int(args.job[1]), args)
        return {}
    start, results = load_results(args)
    todo = [] if start is not None else [("cold_start", 0)]
    todo += [(name, seed) for seed in args.seeds for name in args.variants if seed not in results[name]]
    minutes = estimate_minutes(todo, args)
    print(f"{len(todo)} run(s) to do ({len(args.variants)} variants x {len(args.seeds)} seeds, {args.steps} steps, "
          f"{len(EVAL_LEVELS) * args.eval_problems} problems x {args.eval_samples} samples), {args.jobs} side by "
          f"side: about {minutes:.0f} min on a 2-core machine (cost model: {COSTS})", flush=True)  # fmt: skip
    if args.dry_run:
        return {"todo": todo, "minutes": minutes}
    from recipes.common.model.loading import resolve_model_path

    resolve_model_path(str(args.model), if_missing="cold_start")  # the demo's cold start, built when missing
    args.output_dir.mkdir(parents=True, exist_ok=True)
    started, failed = time.time(), []
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {pool.submit(launch, name, seed, args): (name, seed) for name, seed in todo}
        for future in as_completed(futures):  # the table is rewritten after each run, here in one thread
            name, seed = futures[future]
            if future.result() != 0:
                failed.append("cold start" if name == "cold_start" else f"{name} seed {seed}")
            report(args)
    if not (args.output_dir / "cold_start_eval.json").is_file():
        raise SystemExit(f"the cold-start evaluation failed: see {args.output_dir / 'cold_start.log'}")
    report(args)
    print(args.table.read_text())
    logger.info("%.1f min; table: %s; plot: %s", (time.time() - started) / 60, args.table, args.plot)
    if failed:
        raise SystemExit(f"{len(failed)} run(s) failed: {', '.join(failed)} (see their job.log); rerun to retry them")
    return {"cold_start": load_results(args)[0], **load_results(args)[1]}


if __name__ == "__main__":
    main()
