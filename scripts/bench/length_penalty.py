"""Benchmark: what a length penalty costs per difficulty, and the normalisation trap (issue 59).

    python scripts/bench/length_penalty.py [--experiment length|length_none|trap|all] [--seeds 0 1 2] [--jobs 2]
                                           [--arms ...] [--dry-run]
    python scripts/bench/length_penalty.py --fast        # a smoke run: every arm, seed 0, 2 steps, 1 problem a level

**length**: DAPO from the demo's cold start (artifacts/demo/sft, the shipped one when missing) with the reward
accuracy - lambda x length (`length_penalty`, tokens) at lambda = 0 and four more weights, and with Kimi k1.5's
`kimi_length` in its place; each arm once per seed. The training pool holds every level (1-12), so that the
penalty meets problems where working is cheap and where it is long; a group's variance is read from the summed
reward (`variance_rewards: sum`: with the accuracy alone, a group all right or all wrong would leave the loss
whatever its lengths, and the penalty would act on mixed groups only); there is no overlong reward, so lambda = 0
is accuracy alone. Each final model is evaluated on held-out problems of every level (--eval-problems a level,
--eval-samples samples each at temperature 1, the same problems and sampling streams for every run): accuracy
and completion length per level, paired against lambda = 0 per seed and pooled over seeds.

**length_none**: the same arms with `scale_rewards: none` (Dr. GRPO's advantage, r - mean, no division by the
group's std). Added after the first seed of **length**, where every penalty collapsed (see the read-out's
amendment): with the std division a group all right (or all wrong) whose lengths differ by a few tokens gets
advantages as large as right against wrong, which is the trap below, not the trade a per-level reading wants.

**trap**: from a weak start (the demo's cold-start SFT stopped after --weak-steps steps: the format, not yet the
lookup, so almost every group is all wrong), a small length penalty (--trap-lambda) with `scale_rewards: group`
against `none`, dynamic sampling off and the variance read from the summed reward, each once per seed: training
accuracy and length over steps (metrics.jsonl), the held-out evaluation as above, group minus none paired.

Each run is a child process (sample_efficiency_runs.run_child; --jobs side by side, one torch thread each),
written as it finishes and skipped by a rerun:
  <output-dir>/<arm>/seed<k>/            the training run and job.log;  eval.json: per problem and the curves
  <output-dir>/start_eval.json, weak_start/, weak_start_eval.json     the starting points
  --table (default artifacts/bench/length_penalty.md) and --plot-dir (default docs/img): the tables of
  scripts/bench/length_penalty_report.py and length_by_level.png / length_trap.png, rewritten after every run;
  a --fast run writes them inside its own output folder.
The read-out was fixed before the first run in docs/readouts/length-penalty.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[2]

from scripts.bench.sample_efficiency_runs import (  # noqa: E402
    DAPO,
    Variant,
    run_child,
    sample_held_out,
    saved_result,
    step_records,
    train,
)

logger = logging.getLogger("bench.length_penalty")

LEVELS = list(range(1, 13))
POOL = "synthetic:1-12"
LAMBDAS = (0.003, 0.01, 0.03, 0.1)  # per token: working a level-L problem costs about 3L tokens more than a guess
TRAP_LAMBDA = 0.001
EXPERIMENTS = {"length": ["length"], "length_none": ["length_none"], "trap": ["trap"],
               "all": ["length", "length_none", "trap"]}  # fmt: skip
WEAK_STEPS = 300
ACCURACY = {"name": "math_accuracy", "weight": 1.0}


def _flags(rewards: list[dict], *more: str) -> Callable[[dict, int], list[str]]:
    common = ["--dataset_name", POOL, "--variance_rewards", "sum", "--rewards", json.dumps(rewards), *more]
    return lambda config, seed: list(common)


def lambda_arm(weight: float) -> str:
    return f"lambda_{weight:g}"


def length_arms(scale: str = "group") -> dict[str, Variant]:
    """The length experiment's arms with `scale_rewards: scale` (dapo.yaml's own is group; see the module doc)."""
    prefix, more = ("", ()) if scale == "group" else (f"{scale}_", ("--scale_rewards", scale))
    suffix = "" if scale == "group" else f", scale_rewards {scale}"
    base = prefix + lambda_arm(0)
    return {
        base: Variant(f"accuracy alone (lambda 0){suffix}", DAPO, None, _flags([ACCURACY], *more)),
        **{
            prefix + lambda_arm(weight): Variant(
                f"accuracy - {weight:g} x length{suffix}",
                DAPO,
                base,
                _flags([ACCURACY, {"name": "length_penalty", "weight": weight}], *more),
            )  # fmt: skip
            for weight in LAMBDAS
        },
        prefix + "kimi_length": Variant(
            f"accuracy + kimi_length{suffix}",
            DAPO,
            base,
            _flags([ACCURACY, {"name": "kimi_length", "weight": 1.0}], *more),
        ),  # fmt: skip
    }


LENGTH_ARMS = length_arms("group")
LENGTH_NONE_ARMS = length_arms("none")  # the amendment of docs/readouts/length-penalty.md


def trap_arms(weight: float) -> dict[str, Variant]:
    rewards = [ACCURACY, {"name": "length_penalty", "weight": weight}]
    off = ("--dynamic_sampling", "false")
    return {
        "trap_none": Variant(
            f"weak start, {weight:g} x length, scale_rewards none",
            DAPO,
            None,
            _flags(rewards, *off, "--scale_rewards", "none"),
        ),  # fmt: skip
        "trap_group": Variant(
            f"weak start, {weight:g} x length, scale_rewards group",
            DAPO,
            "trap_none",
            _flags(rewards, *off, "--scale_rewards", "group"),
        ),  # fmt: skip
    }


# ---------------------------------------------------------------- one job


def settings(args) -> dict:
    """What a saved result depends on besides its arm and seed: a rerun reuses it only when these agree."""
    keys = ("model", "base", "steps", "eval_problems", "eval_samples", "eval_seed", "weak_steps", "trap_lambda", "fast")
    return {key: str(getattr(args, key)) for key in keys}


def reuse(path: Path, args) -> dict | None:
    """The saved result at `path` (None when absent); an error when it was made with other settings."""
    return saved_result(path, settings(args))


def evaluate(model_dir: Path, tokenizer, args) -> dict:
    """Held-out problems of every level: per problem its level, correct samples and mean completion tokens."""
    from tasks.synthetic import generate_rows

    rows = generate_rows(LEVELS, args.eval_problems, seed=args.eval_seed, split="eval")
    results, params, _, cpu = sample_held_out(model_dir, tokenizer, rows, args)
    problems = {
        result.id: {
            "level": result.difficulty,
            "pass@1": result.num_correct / result.n,
            "tokens": sum(sample["num_tokens"] for sample in result.samples) / result.n,
        }
        for result in results
    }
    return {"problems": problems, "protocol": params.__dict__, "eval_cpu_seconds": cpu}


def curves(run_dir: Path) -> dict[str, list[float]]:
    """Per training step: the accuracy reward's mean and the mean completion length (metrics.jsonl)."""
    records = step_records(run_dir)
    steps = sorted(records)
    return {
        "step": steps,
        "accuracy": [records[step].get("rewards/math_accuracy/mean") for step in steps],
        "length": [records[step].get("completions/mean_length") for step in steps],
    }


def build_weak_start(args) -> Path:
    """The demo's cold-start SFT stopped after --weak-steps steps (its schedule set for those steps)."""
    folder = args.output_dir / "weak_start"
    if (folder / "run_card.json").is_file():
        return folder
    from recipes import sft

    sft.cli([
        "--config", str(REPO / "recipes" / "configs" / "demo" / "sft.yaml"), "--output_dir", str(folder),
        "--model_name_or_path", str(args.base), "--max_steps", str(args.weak_steps), "--save_strategy", "no",
        "--seed", "0", "--report_to", "none", "--disable_tqdm", "true",
        *(["--dataset_num_rows", "256"] if args.fast else []),
    ])  # fmt: skip
    return folder


def run_job(name: str, seed: int, args) -> None:
    """One job: a starting point's evaluation ("start", "weak_start") or one (arm, seed) trained and evaluated."""
    import torch
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    torch.set_num_threads(args.threads)
    if name in ("start", "weak_start"):
        model = args.model if name == "start" else build_weak_start(args)
        result = evaluate(model, AutoTokenizer.from_pretrained(model), args)
        (args.output_dir / f"{name}_eval.json").write_text(json.dumps({**result, "settings": settings(args)}))
        return
    arms = {**LENGTH_ARMS, **LENGTH_NONE_ARMS, **trap_arms(args.trap_lambda)}
    start = args.model if name in {**LENGTH_ARMS, **LENGTH_NONE_ARMS} else args.output_dir / "weak_start"
    run_dir = args.output_dir / name / f"seed{seed}"
    started = time.process_time()
    train(name, seed, SimpleNamespace(**{**vars(args), "model": start, "save_steps": args.steps}), run_dir, arms)
    train_cpu = time.process_time() - started
    result = evaluate(run_dir, AutoTokenizer.from_pretrained(start), args)
    state = {"arm": name, "seed": seed, "settings": settings(args), **result, "curves": curves(run_dir)}
    (run_dir / "eval.json").write_text(json.dumps({**state, "train_cpu_seconds": train_cpu, "done": True}))


# ---------------------------------------------------------------- the bench


def launch(name: str, seed: int, args) -> int:
    folder = args.output_dir if name in ("start", "weak_start") else args.output_dir / name / f"seed{seed}"
    argv = [
        str(Path(__file__).resolve()), "--job", name, str(seed), "--model", str(args.model), "--steps", str(args.steps),
        "--eval-problems", str(args.eval_problems), "--eval-samples", str(args.eval_samples),
        "--eval-seed", str(args.eval_seed), "--base", str(args.base), "--weak-steps", str(args.weak_steps), "--trap-lambda", str(args.trap_lambda),
        "--output-dir", str(args.output_dir), "--threads", str(args.threads), *(["--fast"] if args.fast else []),
    ]  # fmt: skip
    label = name.replace("_", " ") if folder == args.output_dir else f"{name} seed {seed}"
    return run_child(argv, folder / (f"{name}.log" if folder == args.output_dir else "job.log"), label, args.threads)


# Minutes of one job on a free core, measured on the 2-core machine (see docs/length-and-emergence.md):
COST_MINUTES = {"step": 2.05 / 60, "eval_completion": 0.0064 / 60, "start": 5 / 60, "weak_start_step": 0.15 / 60}


def estimate_minutes(todo: list[tuple[str, int]], args) -> float:
    evaluation = len(LEVELS) * args.eval_problems * args.eval_samples * COST_MINUTES["eval_completion"]
    free = [0.0] * max(1, args.jobs)
    for name, _ in todo:
        minutes = COST_MINUTES["start"] + evaluation
        if name == "weak_start":
            minutes += args.weak_steps * COST_MINUTES["weak_start_step"]
        elif name != "start":
            minutes += args.steps * COST_MINUTES["step"]
        free[free.index(min(free))] += minutes
    return max(free)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--experiment", choices=EXPERIMENTS, default="all", help="default: all of them")
    parser.add_argument("--model", type=Path, default=REPO / "artifacts" / "demo" / "sft", help="the cold start")
    parser.add_argument("--base", type=Path, default=REPO / "artifacts" / "tiny-base",
                        help="the untrained model the weak start's SFT starts from (built when missing)")  # fmt: skip
    parser.add_argument("--arms", nargs="+", default=None, help="some of the experiment's arms (default: all)")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="default 0 1 2 (fast: 0)")
    parser.add_argument("--steps", type=int, default=None, help="optimizer steps per run (default 60; fast 2)")
    parser.add_argument("--eval-problems", type=int, default=None, help="held-out problems a level (default 25)")
    parser.add_argument("--eval-samples", type=int, default=None, help="samples a problem (default 8)")
    parser.add_argument("--eval-seed", type=int, default=0)
    parser.add_argument("--weak-steps", type=int, default=None, help=f"the weak start's SFT steps ({WEAK_STEPS})")
    parser.add_argument("--trap-lambda", type=float, default=TRAP_LAMBDA, help="the trap's length penalty a token")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--output-dir", type=Path, default=None, help="default artifacts/bench/length_penalty")
    parser.add_argument("--table", type=Path, default=None, help="default artifacts/bench/length_penalty.md")
    parser.add_argument("--plot-dir", type=Path, default=None, help="default docs/img")
    parser.add_argument("--fast", action="store_true", help="a smoke run (2 steps, 1 problem a level, seed 0)")
    parser.add_argument("--dry-run", action="store_true", help="print the runs to do and the estimate, then stop")
    parser.add_argument("--job", nargs=2, metavar=("ARM", "SEED"), help=argparse.SUPPRESS)  # one run, internal
    args = parser.parse_args(argv)
    known = [*LENGTH_ARMS, *LENGTH_NONE_ARMS, *trap_arms(args.trap_lambda)]
    if args.arms and sorted(set(args.arms) - set(known)):
        parser.error(f"unknown arm(s) {sorted(set(args.arms) - set(known))}; choose from {', '.join(known)}")
    args.steps = args.steps or (2 if args.fast else 60)
    args.eval_problems = args.eval_problems or (1 if args.fast else 25)
    args.eval_samples = args.eval_samples or (2 if args.fast else 8)
    args.weak_steps = args.weak_steps or (4 if args.fast else WEAK_STEPS)
    args.seeds = args.seeds if args.seeds is not None else ([0] if args.fast else [0, 1, 2])
    bench = REPO / "artifacts" / "bench"
    args.output_dir = args.output_dir or bench / ("length_penalty_fast" if args.fast else "length_penalty")
    args.table = args.table or (args.output_dir if args.fast else bench) / "length_penalty.md"
    args.plot_dir = args.plot_dir or (args.output_dir if args.fast else REPO / "docs" / "img")
    return args


def load(args) -> dict:
    """Every finished evaluation on disk: {"start": ..., "weak_start": ..., arm: {seed: eval}}."""
    found = {name: reuse(args.output_dir / f"{name}_eval.json", args) for name in ("start", "weak_start")}
    for arm in [*LENGTH_ARMS, *LENGTH_NONE_ARMS, *trap_arms(args.trap_lambda)]:
        runs = {seed: reuse(args.output_dir / arm / f"seed{seed}" / "eval.json", args) for seed in args.seeds}
        found[arm] = {seed: run for seed, run in runs.items() if run and run.get("done")}
    return found


def report(args) -> dict:
    from scripts.bench.length_penalty_report import write_report

    return write_report(load(args), {"group": LENGTH_ARMS, "none": LENGTH_NONE_ARMS}, trap_arms(args.trap_lambda), args)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    if args.job:
        run_job(args.job[0], int(args.job[1]), args)
        return {}
    found = load(args)
    chosen = EXPERIMENTS[args.experiment]
    tables = {"length": LENGTH_ARMS, "length_none": LENGTH_NONE_ARMS, "trap": trap_arms(args.trap_lambda)}
    arms = [arm for experiment in chosen for arm in tables[experiment] if not args.arms or arm in args.arms]
    needed = ["start"] * bool({"length", "length_none"} & set(chosen)) + ["weak_start"] * ("trap" in chosen)
    starts = [name for name in needed if found[name] is None]
    runs = [(arm, seed) for seed in args.seeds for arm in arms if seed not in found[arm]]
    minutes = estimate_minutes([(name, 0) for name in starts] + runs, args)
    print(f"{len(starts) + len(runs)} job(s) to do ({len(arms)} arms x {len(args.seeds)} seeds, {args.steps} steps, "
          f"{len(LEVELS) * args.eval_problems} problems x {args.eval_samples} samples), {args.jobs} side by side: "
          f"about {minutes:.0f} min on a 2-core machine", flush=True)  # fmt: skip
    if args.dry_run:
        return {"todo": starts + runs, "minutes": minutes}
    from recipes.common.model.loading import resolve_model_path

    resolve_model_path(str(args.model), if_missing="cold_start")  # the shipped cold start, copied when missing
    if "weak_start" in needed:  # the trap's weak start trains from the untrained tiny model, built when missing
        resolve_model_path(str(args.base), if_missing="tiny")
    args.output_dir.mkdir(parents=True, exist_ok=True)
    failed = []
    for phase in ([(name, 0) for name in starts], runs):  # the weak start before the runs that train from it
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futures = {pool.submit(launch, arm, seed, args): (arm, seed) for arm, seed in phase}
            for future in as_completed(futures):
                if future.result() != 0:
                    failed.append("{} seed {}".format(*futures[future]))
                report(args)
    summary = report(args)
    print(args.table.read_text())
    if failed:
        raise SystemExit(f"{len(failed)} job(s) failed: {', '.join(failed)} (see their logs); rerun to retry them")
    return summary


if __name__ == "__main__":
    main()
