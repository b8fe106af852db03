"""Benchmark: does RL create long reasoning, or select a behaviour the base already has? (issue 59, item 3)

    python scripts/bench/emergence.py [--bases work10 work2 work0.5 work0] [--seeds 0 1 2] [--steps N]
                                      [--sft-steps N] [--jobs 2] [--dry-run]
    python scripts/bench/emergence.py --fast     # a smoke run into artifacts/bench/emergence_fast/

The bases: recipes/sft.py with the demo's cold-start config (recipes/configs/demo/sft.yaml) continued from the
shipped cold start (--base: it has the lookup, and writes its working every time), on the same rows of levels 1-4
in the same order, with the same seed and steps. Each row's completion
either shows its working (the task's solution, one hop a line inside <think>) or answers directly
(`<think>\\n</think>\\n\\boxed{N}`); the bases differ only in the share showing working (BASES: 10%, 2%, 0.5%,
0%), drawn exactly per level by a seeded shuffle (scripts/bench/emergence_measures.py). Each base is evaluated
on held-out levels 1-6 (level 1: has it learned the lookup; levels 2-6: how often it shows working when sampled).

The runs (ARMS): from each base, recipes/grpo.py with recipes/configs/demo/dapo.yaml and math_accuracy as the
only reward (the overlong shaping dropped), on levels 2-6, one run per seed; and on the work10 base an arm with a
format reward that penalises text after the boxed answer (weight 0.2). Every step logs, as gold rewards (never
in the loss), the share of completions showing working and the share with text after the box; the report reads
them from each run's metrics.jsonl and gives the first step whose share reaches 5%, 50% and 95% (at least the
threshold; None when never). The final model is evaluated on the same held-out problems (levels 2-6) for all.

Why: dapo.yaml has no KL term (which would hold the policy at its base's share), a token-level loss (GRPO's
per-sequence mean favours short right answers) and dynamic sampling (which keeps the rare group where a worked
answer is right); levels 2-6 are where working can pay (one hop is as easy answered directly; the bases, trained
on 1-4, seldom solve more than 6). The bases continue the cold start because from the untrained model 2000 steps
of these rows taught no lookup at all (level-1 pass@1 0.048 for 10% and 2% working; docs/readouts/emergence.md's
amendment): the worked rows are what teach it, so a base must have it before its share of working is cut. The
report flags a base whose level-1 pass@1 is under 0.8.

Written as results come in, each job a child process (sample_efficiency_runs.run_child; `--jobs` side by side, one torch thread each); a rerun
skips what is done, and refuses results made with other settings:
  <output-dir>/bases/<base>/               rows.jsonl, model/ (the SFT run), base.json (its evaluation), job.log
  <output-dir>/<arm>/<base>/seed<k>/       the GRPO run (metrics.jsonl, run_card.json), eval.json, job.log
  --table (default artifacts/bench/emergence.md) and --plot (default docs/img/emergence.png), rewritten after
  every job; a --fast run writes both inside its own output folder instead.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

from basics.atomic_files import read_json, write_atomic  # noqa: E402
from recipes.common.model.loading import SHIPPED_COLD_START  # noqa: E402
from scripts.bench.emergence_measures import EVAL_LEVELS, evaluate, write_plot, write_table  # noqa: E402
from scripts.bench.sample_efficiency_runs import (  # noqa: E402
    CONFIGS,
    finished_run,
    run_child,
    saved_result,
    step_records,
)

logger = logging.getLogger("bench.emergence")

MEASURES = Path(__file__).resolve().parent / "emergence_measures.py"
BASES = {"work10": 0.10, "work2": 0.02, "work0.5": 0.005, "work0": 0.0}  # share of SFT rows showing working
SFT_LEVELS, TRAIN_LEVELS, BASE_EVAL_LEVELS = [1, 2, 3, 4], "2-6", list(range(1, 7))
TRAIN_ROWS = 400  # per level: 2000 distinct prompts (100 steps draw 800, dynamic sampling's extra rounds more)
SFT_DATA_SEED = 0  # sft.yaml's dataset_seed; the GRPO pool uses dapo.yaml's (1): other problems
FIX_WEIGHT, FIX_BASE = 0.2, "work10"
ARMS = {"accuracy": "accuracy only", "no_after_box": f"accuracy + {FIX_WEIGHT} x no text after the box"}
GOLD = {"working": "gold/shows_working", "after_box": "gold/text_after_box", "accuracy": "rewards/math_accuracy/mean"}

# The cost model behind --dry-run's estimate, CPU seconds of one thread (the wall time on a free core). Measured
# on the 2-core machine (load ~1): recipes/sft.py on the work10 rows, 300 steps: 47.4 s of training (0.158 s/step)
# in an 80 s process (imports, the 64000 rows read, mapped and tokenised); 5 GRPO steps of grpo_argv's run from
# that model: 0.65 s/step, every step at dynamic sampling's cap (4 rounds x 64 completions of ~16 tokens; a policy
# showing its working writes ~2.5x longer ones, fewer rounds once groups vary: 1.0 s/step assumed); its evaluation,
# 480 completions in 1.11 s (a model showing working: longer).
COSTS = {
    "sft_step_s": 0.158,  # an SFT step (batch 32, levels 1-4)
    "sft_row_s": 0.0004,  # reading, mapping and tokenising one SFT row
    "grpo_step_s": 1.0,  # a DAPO step (8 prompts x 8 samples, up to 4 rounds of dynamic sampling)
    "eval_completion_s": 0.004,  # one held-out completion (batch 256, up to 96 new tokens)
    "job_start_s": 6.0,  # a job's imports and model loads
    "idle_overhead": 1.43,  # wall / CPU time of sample_efficiency's full run on 2 shared cores
}


# ---------------------------------------------------------------- settings and saved results


def base_settings(args) -> dict:
    """What a base's files depend on: a rerun reuses them only when these agree."""
    keys = ("base", "sft_steps", "sft_rows", "eval_problems", "eval_samples", "eval_seed", "fast")
    return {key: str(getattr(args, key)) for key in keys}


def run_settings(args) -> dict:
    """What a run's files depend on (its base's settings, its steps)."""
    return {**base_settings(args), "steps": str(args.steps)}


def base_dir(args, base: str) -> Path:
    """A base's folder: its rows, its SFT run (model/), base.json and job.log."""
    return args.output_dir / "bases" / base


def run_dir(args, arm: str, base: str, seed: int) -> Path:
    """A run's folder: the GRPO run's output, eval.json and job.log."""
    return args.output_dir / arm / base / f"seed{seed}"


# ---------------------------------------------------------------- the jobs (each in its own process)


def sft_argv(args, base: str, rows_path: Path, rows: int) -> list[str]:
    """recipes/sft.py's command line for one base: the demo's cold start on this base's rows."""
    folder = base_dir(args, base) / "model"
    argv = [
        "--config", str(CONFIGS / "sft.yaml"), "--model_name_or_path", str(args.base), "--output_dir", str(folder),
        "--dataset_name", str(rows_path), "--dataset_num_rows", str(rows), "--max_steps", str(args.sft_steps),
        "--demo_model_if_missing", "false", "--report_to", "none", "--disable_tqdm", "true", "--logging_steps", "50",
    ]  # fmt: skip
    if args.fast:
        argv += ["--per_device_train_batch_size", "8", "--warmup_steps", "0", "--save_strategy", "no"]
    if any(folder.glob("checkpoint-*")):
        argv += ["--resume_from_checkpoint", "true"]
    return argv


def build_base(base: str, args) -> None:
    """One base: its rows, its SFT (skipped when its run card exists), its evaluation into base.json."""
    from basics.atomic_files import write_jsonl
    from recipes import sft
    from scripts.bench.emergence_measures import base_rows, is_working
    from tasks.synthetic import generate_rows

    folder = base_dir(args, base)
    if (saved_result(folder / "base.json", base_settings(args)) or {}).get("done"):
        return
    rows = base_rows(generate_rows(SFT_LEVELS, args.sft_rows, seed=SFT_DATA_SEED), BASES[base], SFT_DATA_SEED)
    write_jsonl(folder / "rows.jsonl", rows)
    cpu = time.process_time()
    card = read_json(folder / "model" / "run_card.json")
    if card is not None:
        if (card["base_model"], card["final_step"]) != (str(args.base), args.sft_steps):
            raise SystemExit(f"{folder / 'model'} holds an SFT run of {card['base_model']}, {card['final_step']} "
                             "steps: delete it to redo it")  # fmt: skip
    else:
        sft.cli(sft_argv(args, base, folder / "rows.jsonl", len(rows)))
    sft_cpu = time.process_time() - cpu
    working = sum(is_working(row["solution"]) for row in rows)
    saved = {"base": base, "share": BASES[base], "rows": len(rows), "working_rows": working, "done": True,
             "sft_cpu_seconds": sft_cpu, "start_cpu_seconds": cpu, "settings": base_settings(args),
             **evaluate(folder / "model", BASE_EVAL_LEVELS, args)}  # fmt: skip
    write_atomic(folder / "base.json", json.dumps(saved, indent=1))


def grpo_argv(args, arm: str, base: str, seed: int) -> list[str]:
    """recipes/grpo.py's command line for one run: dapo.yaml, the arm's rewards, the measures as gold rewards."""
    rewards = [{"name": "math_accuracy", "weight": 1.0}]
    if arm == "no_after_box":
        rewards.append({"name": f"{MEASURES}:no_text_after_box", "weight": FIX_WEIGHT})
    gold = [{"name": f"{MEASURES}:shows_working"}, {"name": f"{MEASURES}:text_after_box"}]
    folder = run_dir(args, arm, base, seed)
    argv = [
        "--config", str(CONFIGS / "dapo.yaml"), "--rewards", json.dumps(rewards), "--gold_rewards", json.dumps(gold),
        "--model_name_or_path", str(base_dir(args, base) / "model"), "--output_dir", str(folder),
        "--seed", str(seed), "--dataset_name", f"synthetic:{TRAIN_LEVELS}",
        "--dataset_num_rows", "4" if args.fast else str(TRAIN_ROWS),
        "--max_steps", str(args.steps), "--save_strategy", "steps", "--save_steps", str(min(25, args.steps)),
        "--save_total_limit", "1", "--logging_steps", "1", "--demo_model_if_missing", "false",
        "--report_to", "none", "--disable_tqdm", "true",
    ]  # fmt: skip
    if args.fast:
        argv += ["--num_generations", "4", "--warmup_steps", "0", "--per_device_train_batch_size", "8",
                 "--max_completion_length", "48", "--dynamic_sampling_max_rounds", "1"]  # fmt: skip
    if any(folder.glob("checkpoint-*")):
        argv += ["--resume_from_checkpoint", "true"]
    return argv


def step_series(folder: Path) -> dict[str, dict[int, float]]:
    """Per training step, from metrics.jsonl: the share showing working, with text after the box, and the batch
    accuracy (dynamic sampling's rounds of a step averaged as the trainer logs them)."""
    records = step_records(folder)
    return {key: {step: records[step][name] for step in sorted(records) if name in records[step]}
            for key, name in GOLD.items()}  # fmt: skip


def train_run(arm: str, base: str, seed: int, args) -> None:
    """One (arm, base, seed): GRPO (resumed from its last checkpoint), then the final model's evaluation."""
    from recipes import grpo

    folder = run_dir(args, arm, base, seed)
    out = folder / "eval.json"
    if (saved_result(out, run_settings(args)) or {}).get("done"):
        return
    cpu = time.process_time()
    if not finished_run(folder, base_dir(args, base) / "model", args.steps, seed):
        folder.mkdir(parents=True, exist_ok=True)
        grpo.cli(grpo_argv(args, arm, base, seed))
    saved = {"arm": arm, "base": base, "seed": seed, "settings": run_settings(args), "start_cpu_seconds": cpu,
             "train_cpu_seconds": time.process_time() - cpu, "series": step_series(folder),
             **evaluate(folder, EVAL_LEVELS, args), "done": True}  # fmt: skip
    write_atomic(out, json.dumps(saved, indent=1))


def run_job(kind: str, base: str, seed: int, args) -> None:
    """The child process's work: a base (`kind` "base") or one GRPO run of arm `kind`."""
    import torch
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    torch.set_num_threads(args.threads)
    if kind == "base":
        build_base(base, args)
    else:
        train_run(kind, base, seed, args)


# ---------------------------------------------------------------- the bench


def launch(job: tuple[str, str, int], args) -> int:
    """Run one job in a child process (a crash there stops only that job); its output goes to its job.log."""
    kind, base, seed = job
    folder = base_dir(args, base) if kind == "base" else run_dir(args, kind, base, seed)
    argv = [str(Path(__file__).resolve()), "--job", kind, base, str(seed), *passed_on(args)]
    return run_child(
        argv, folder / "job.log", f"{kind} {base}" + ("" if kind == "base" else f" seed {seed}"), args.threads
    )


def passed_on(args) -> list[str]:
    """The options a child process needs to do its job as this process would."""
    return ["--base", str(args.base), "--sft-steps", str(args.sft_steps), "--sft-rows", str(args.sft_rows),
            "--steps", str(args.steps), "--eval-problems", str(args.eval_problems), "--eval-samples",
            str(args.eval_samples), "--eval-seed", str(args.eval_seed), "--output-dir", str(args.output_dir),
            "--threads", str(args.threads), *(["--fast"] if args.fast else [])]  # fmt: skip


def job_minutes(job: tuple[str, str, int], args) -> float:
    """The cost model's wall minutes for one job (COSTS)."""
    levels = BASE_EVAL_LEVELS if job[0] == "base" else EVAL_LEVELS
    evaluate_s = len(levels) * args.eval_problems * args.eval_samples * COSTS["eval_completion_s"]
    sft = args.sft_steps * COSTS["sft_step_s"] + len(SFT_LEVELS) * args.sft_rows * COSTS["sft_row_s"]
    work = sft if job[0] == "base" else args.steps * COSTS["grpo_step_s"]
    return (COSTS["job_start_s"] + work + evaluate_s) * COSTS["idle_overhead"] / 60


def estimate_minutes(phases: list[list[tuple[str, str, int]]], args) -> float:
    """Wall minutes for the phases one after the other, each job to the first of args.jobs workers free."""
    total = 0.0
    for jobs in phases:
        free = [0.0] * max(1, args.jobs)
        for job in jobs:
            free[free.index(min(free))] += job_minutes(job, args)
        total += max(free)
    return total


def planned_runs(args) -> list[tuple[str, str, int]]:
    """Every (arm, base, seed) of the bench: accuracy-only from each base, the drift fix from FIX_BASE."""
    runs = [("accuracy", base, seed) for seed in args.seeds for base in args.bases]
    return runs + [("no_after_box", FIX_BASE, seed) for seed in args.seeds if FIX_BASE in args.bases]


def load_results(args) -> tuple[dict[str, dict], dict[tuple[str, str, int], dict]]:
    """The finished bases and runs on disk, for the chosen ones."""
    bases = {base: saved_result(base_dir(args, base) / "base.json", base_settings(args)) for base in args.bases}
    runs = {run: saved_result(run_dir(args, *run) / "eval.json", run_settings(args)) for run in planned_runs(args)}
    return (
        {k: v for k, v in bases.items() if v and v.get("done")},
        {k: v for k, v in runs.items() if v and v.get("done")},
    )


def report(args) -> None:
    """Rewrite the table and the plot from what is on disk."""
    bases, runs = load_results(args)
    setup = {"start": args.base.name, "sft_steps": args.sft_steps, "sft_rows": args.sft_rows, "steps": args.steps, "seeds": args.seeds,
             "eval_problems": args.eval_problems, "eval_samples": args.eval_samples, "eval_seed": args.eval_seed,
             "train_levels": TRAIN_LEVELS, "bases": args.bases, "fix_weight": FIX_WEIGHT, "fix_base": FIX_BASE, "arms": ARMS}  # fmt: skip
    write_table(args.table, bases, runs, setup)
    if runs:
        write_plot(args.plot, runs, setup)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line; --fast sets a smoke run's sizes and its own output folder."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, default=SHIPPED_COLD_START,
                        help="the model each base's SFT continues (default: the shipped cold start)")  # fmt: skip
    parser.add_argument("--bases", nargs="+", default=list(BASES), choices=list(BASES), help="default: all four")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="GRPO seeds (default 0 1 2; fast 0)")
    parser.add_argument("--steps", type=int, default=None, help="GRPO steps per run (default 100; fast 2)")
    parser.add_argument("--sft-steps", type=int, default=None, help="SFT steps per base (default 800; fast 4)")
    parser.add_argument("--sft-rows", type=int, default=None, help="SFT rows per level (default 6400; fast 8)")
    parser.add_argument("--eval-problems", type=int, default=None, help="held-out problems per level (default 50)")
    parser.add_argument("--eval-samples", type=int, default=None, help="samples per problem (default 8; fast 2)")
    parser.add_argument("--eval-seed", type=int, default=0, help="held-out problems and their sampling streams")
    parser.add_argument("--jobs", type=int, default=2, help="jobs side by side (default 2)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads per job")
    parser.add_argument("--output-dir", type=Path, default=None, help="default artifacts/bench/emergence")
    parser.add_argument("--table", type=Path, default=None, help="default artifacts/bench/emergence.md")
    parser.add_argument("--plot", type=Path, default=None, help="default docs/img/emergence.png")
    parser.add_argument("--fast", action="store_true", help="a smoke run: 4 SFT steps, 2 GRPO steps, 1 problem a level")
    parser.add_argument("--dry-run", action="store_true", help="print the jobs to do and the estimate, then stop")
    parser.add_argument("--job", nargs=3, metavar=("KIND", "BASE", "SEED"), help=argparse.SUPPRESS)  # internal
    args = parser.parse_args(argv)
    fast = args.fast
    args.seeds = args.seeds if args.seeds is not None else ([0] if fast else [0, 1, 2])
    args.steps = args.steps or (2 if fast else 100)
    args.sft_steps, args.sft_rows = args.sft_steps or (4 if fast else 800), args.sft_rows or (8 if fast else 6400)
    args.eval_problems = args.eval_problems or (1 if fast else 50)
    args.eval_samples = args.eval_samples or (2 if fast else 8)
    bench = REPO / "artifacts" / "bench"
    args.output_dir = args.output_dir or bench / ("emergence_fast" if fast else "emergence")
    args.table = args.table or (args.output_dir / "emergence.md" if fast else bench / "emergence.md")
    args.plot = args.plot or (args.output_dir / "emergence.png" if fast else REPO / "docs" / "img" / "emergence.png")
    args.base, args.output_dir = args.base.resolve(), args.output_dir.resolve()
    return args


def ensure_base(args) -> None:
    """The untrained tiny base, built when missing at its own path (recipes.common.model.loading.resolve_model_path)."""
    from recipes.common.model.loading import DEMO_MODEL_PATHS, ModelNotFoundError, resolve_model_path

    with contextlib.chdir(REPO):  # the demo's own path is relative to the checkout
        own = args.base == (REPO / DEMO_MODEL_PATHS["tiny"]).resolve()
        try:
            resolve_model_path(DEMO_MODEL_PATHS["tiny"] if own else str(args.base), if_missing="tiny" if own else None)
        except ModelNotFoundError as error:
            raise SystemExit(f"--base: {error}") from None


def run_phase(jobs: list[tuple[str, str, int]], args) -> list[str]:
    """The jobs on args.jobs workers, the report rewritten after each; returns the failed ones."""
    failed = []
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {pool.submit(launch, job, args): job for job in jobs}
        for future in as_completed(futures):  # the report is rewritten here, in one thread
            if future.result() != 0:
                failed.append(" ".join(map(str, futures[future])))
            report(args)
    return failed


def main(argv: list[str] | None = None) -> dict:
    """The bench: the bases, then the runs, then the report; or one job (--job), or the plan (--dry-run)."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    if args.job:
        run_job(args.job[0], args.job[1], int(args.job[2]), args)
        return {}
    bases, runs = load_results(args)
    phases = [[("base", base, 0) for base in args.bases if base not in bases],
              [run for run in planned_runs(args) if run not in runs]]  # fmt: skip
    minutes = estimate_minutes(phases, args)
    print(f"{len(phases[0])} base(s) and {len(phases[1])} run(s) to do ({args.sft_steps} SFT steps, {args.steps} GRPO "
          f"steps, seeds {args.seeds}), {args.jobs} side by side: about {minutes:.0f} min on a 2-core machine "
          f"(cost model: {COSTS})", flush=True)  # fmt: skip
    for job in phases[0] + phases[1]:
        print(f"  {job[0]} {job[1]}" + ("" if job[0] == "base" else f" seed {job[2]}"), flush=True)
    if args.dry_run:
        return {"todo": phases[0] + phases[1], "minutes": minutes}
    ensure_base(args)
    started = time.time()
    failed = run_phase(phases[0], args)
    bases, _ = load_results(args)
    failed += run_phase([run for run in phases[1] if run[1] in bases], args)  # a run waits for its base
    report(args)
    print(args.table.read_text())
    logger.info("%.1f min; table: %s; plot: %s", (time.time() - started) / 60, args.table, args.plot)
    if failed:
        raise SystemExit(f"{len(failed)} job(s) failed: {', '.join(failed)} (see their job.log); rerun to retry them")
    return {"bases": bases, "runs": load_results(args)[1]}


if __name__ == "__main__":
    main()
