"""Benchmark: held-out pass@1 against the number of sampled completions, for GRPO, Dr. GRPO and DAPO.

    python scripts/bench/sample_efficiency.py [--model DIR] [--steps 100] [--save-steps 25]
                                              [--methods grpo,dr_grpo,dapo,dapo_no_ds] [--output-dir DIR]
    python scripts/bench/sample_efficiency.py --fast      # a smoke run: a few steps, a few problems

Every method trains the same cold-start model with recipes/grpo.py and its demo config (dapo_no_ds is
demo/dapo.yaml with dynamic sampling off), the same seed and the same budget of optimizer steps, and
saves a checkpoint every --save-steps steps. Each checkpoint is then evaluated on the same held-out
problems (the synthetic task's eval split, levels 5-12, --eval-problems per level), --eval-samples
samples each at temperature 1, every problem with its own seeded random streams (eval.sampler), so
the checkpoints differ only by their weights. The x-axis counts the completions a method sampled to
get there, read from each step's metrics.jsonl record: dynamic sampling's extra generation rounds are
included (`dynamic_sampling/groups_generated` x num_generations), so DAPO pays for its filtered batches.

Written as results come in (a crash loses nothing; a rerun skips what is done):
  <output-dir>/<method>/         the training run (checkpoints, metrics.jsonl, run_card.json, train.log)
  <output-dir>/<method>/eval.json  pass@1 per checkpoint, with per-problem counts
  <output-dir>/cold_start_eval.json  the starting point, shared by all methods
  --table (default artifacts/bench/sample_efficiency.md) and --plot (default docs/img/sample_efficiency.png);
  a --fast run writes both inside its own output folder instead.

--model defaults to artifacts/demo/sft, the demo's cold-start model; when it is missing, the SFT
recipe's embedded default builds it first (about 5 minutes on two cores).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script from a checkout that is not installed
    sys.path.insert(0, str(REPO))

from eval.metrics import bootstrap_ci  # noqa: E402

logger = logging.getLogger("bench.sample_efficiency")

CONFIGS = REPO / "recipes" / "configs" / "demo"
METHODS = {
    "grpo": ("GRPO", CONFIGS / "grpo.yaml", []),
    "dr_grpo": ("Dr. GRPO", CONFIGS / "dr_grpo.yaml", []),
    "dapo": ("DAPO", CONFIGS / "dapo.yaml", []),
    "dapo_no_ds": ("DAPO without dynamic sampling", CONFIGS / "dapo.yaml", ["--dynamic_sampling", "false"]),
}
EVAL_LEVELS = list(range(5, 13))
MAX_NEW_TOKENS = 96  # the demo configs' max_completion_length


# ---------------------------------------------------------------- training


def train(method: str, args, run_dir: Path) -> None:
    """recipes/grpo.py in a child process (a crash there stops only this method); resumes a cut-off run."""
    if (run_dir / "run_card.json").is_file():
        card = json.loads((run_dir / "run_card.json").read_text())
        if (card["base_model"], card["final_step"]) != (str(args.model), args.steps):
            raise SystemExit(f"{run_dir} holds a run of {card['base_model']} for {card['final_step']} steps: "
                             "give another --output-dir, or delete it to redo it")  # fmt: skip
        logger.info("[%s] trained already: %s", method, run_dir)
        return
    _, config, extra = METHODS[method]
    argv = [
        sys.executable, str(REPO / "recipes" / "grpo.py"), "--config", str(config), *extra,
        "--model_name_or_path", str(args.model), "--output_dir", str(run_dir), "--seed", str(args.seed),
        "--max_steps", str(args.steps), "--save_strategy", "steps", "--save_steps", str(args.save_steps),
        "--save_total_limit", str(args.steps // args.save_steps + 1), "--logging_steps", "1",
        "--cold_start_if_missing", "false", "--report_to", "none", "--disable_tqdm", "true",
    ]  # fmt: skip
    if args.fast:
        argv += ["--dataset_num_rows", "50"]
    if any(run_dir.glob("checkpoint-*")):
        argv += ["--resume_from_checkpoint", "true"]
        logger.info("[%s] resuming the interrupted run in %s", method, run_dir)
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    run_dir.mkdir(parents=True, exist_ok=True)
    logger.info("[%s] training %d steps (log: %s)", method, args.steps, run_dir / "train.log")
    started = time.time()
    with open(run_dir / "train.log", "a") as log:
        code = subprocess.run(argv, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
    if code != 0:
        raise RuntimeError(f"training {method} failed (exit {code}); see {run_dir / 'train.log'}")
    logger.info("[%s] trained in %.1f min", method, (time.time() - started) / 60)


def completions_by_step(run_dir: Path) -> dict[int, int]:
    """Cumulative completions sampled after each step, from metrics.jsonl (one record per step)."""
    card = json.loads((run_dir / "run_card.json").read_text())
    training = card["config"]["training"]
    per_group = training["num_generations"]
    # Without dynamic sampling a step consumes its share of one generation batch: TRL generates
    # per_device_train_batch_size x processes x steps_per_generation completions every
    # steps_per_generation x num_iterations steps.
    plain = training["per_device_train_batch_size"] * card.get("processes", 1) / training["num_iterations"]
    records: dict[int, dict] = {}
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        if "loss" in record:  # a training-step log (the last line is the run summary)
            records[record["step"]] = record  # a resumed run logs some steps twice: the later one counts
    total, cumulative = 0.0, {0: 0}
    for step in sorted(records):
        generated = records[step].get("dynamic_sampling/groups_generated")
        total += plain if generated is None else generated * per_group
        cumulative[step] = round(total)
    return cumulative


# ---------------------------------------------------------------- evaluation


def evaluate(model_dir: Path, tokenizer, rows: list[dict], args) -> dict:
    """Pass@1 and pass@n on the held-out rows, with a 95% bootstrap interval over problems."""
    from transformers import AutoModelForCausalLM

    from eval.runner import sample_and_score
    from eval.sampler import SamplingParams, TransformersSampler

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    params = SamplingParams(n=args.eval_samples, temperature=1.0, max_new_tokens=MAX_NEW_TOKENS, seed=args.seed)
    results = sample_and_score(TransformersSampler(model, tokenizer, batch_size=256), rows, params, progress=False)
    per_problem = [result.pass_at(1) for result in results]
    low, high = bootstrap_ci(per_problem)
    return {
        "pass@1": sum(per_problem) / len(per_problem),
        "ci95": [low, high],
        f"pass@{params.n}": sum(result.pass_at(params.n) for result in results) / len(results),
        "num_correct": [result.num_correct for result in results],
        "protocol": params.__dict__,
    }


def checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    """(step, folder) of every saved checkpoint, and the final model when its step has no checkpoint."""
    found = {int(path.name.split("-")[1]): path for path in run_dir.glob("checkpoint-*") if path.is_dir()}
    card = json.loads((run_dir / "run_card.json").read_text())
    found.setdefault(card["final_step"], run_dir)
    return sorted(found.items())


def evaluate_run(method: str, run_dir: Path, tokenizer, rows, args) -> dict:
    out = run_dir / "eval.json"
    state = reuse(out, args) or {"method": method, "settings": settings(args), "points": {}}
    completions = completions_by_step(run_dir)
    for step, folder in checkpoints(run_dir):
        if str(step) in state["points"]:
            continue
        logger.info("[%s] evaluating step %d (%s)", method, step, folder.name)
        point = evaluate(folder, tokenizer, rows, args)
        point["completions"] = completions[step]
        state["points"][str(step)] = point
        out.write_text(json.dumps(state, indent=1))
    summary = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    runtime = next((record["train_runtime"] for record in reversed(summary) if "train_runtime" in record), None)
    state["train_minutes"] = None if runtime is None else runtime / 60
    state["done"] = True
    out.write_text(json.dumps(state, indent=1))
    return state


def settings(args) -> dict:
    """What a saved result depends on: a rerun reuses it only when these agree."""
    keys = ("model", "steps", "save_steps", "eval_problems", "eval_samples", "seed", "fast")
    return {key: str(getattr(args, key)) for key in keys}


def reuse(path: Path, args) -> dict | None:
    """The saved result at `path`, when there is one; an error when it was made with other settings."""
    if not path.is_file():
        return None
    saved = json.loads(path.read_text())
    if saved.get("settings") != settings(args):
        raise SystemExit(
            f"{path} was made with other settings ({saved.get('settings')}, now {settings(args)}): "
            "give another --output-dir, or delete it to redo it"
        )
    return saved


# ---------------------------------------------------------------- report


def curve(state: dict, start: dict) -> list[tuple[int, int, dict]]:
    """(step, completions, point) from the cold start on."""
    points = [(0, 0, start)]
    points += [(int(step), point["completions"], point) for step, point in state["points"].items()]
    return sorted(points, key=lambda item: item[0])


def write_table(path: Path, states: dict, start: dict, args) -> None:
    n = args.eval_samples
    problems = len(start["num_correct"])
    lines = [
        "# Sample efficiency on the synthetic task",
        "",
        f"Held-out pass@1 (eval split, levels {EVAL_LEVELS[0]}-{EVAL_LEVELS[-1]}, {problems} problems, {n} samples "
        f"each at temperature 1, max {MAX_NEW_TOKENS} new tokens; 95% bootstrap CI over problems) after "
        f"{args.steps} steps of each method from the same cold-start model (`{args.model}`), seed {args.seed}. "
        "Completions sampled include dynamic sampling's extra generation rounds.",
        "",
        f"| method | steps | completions sampled | pass@1 [95% CI] | pass@{n} | train time (min) |",
        "|---|---:|---:|---|---:|---:|",
        f"| cold start | 0 | 0 | {start['pass@1']:.3f} [{start['ci95'][0]:.3f}, {start['ci95'][1]:.3f}] "
        f"| {start[f'pass@{n}']:.3f} | |",
    ]
    for method, state in states.items():
        step, completions, end = curve(state, start)[-1]
        minutes = state.get("train_minutes")
        lines.append(
            f"| {METHODS[method][0]} | {step} | {completions} | {end['pass@1']:.3f} "
            f"[{end['ci95'][0]:.3f}, {end['ci95'][1]:.3f}] | {end[f'pass@{n}']:.3f} | "
            f"{'' if minutes is None else f'{minutes:.1f}'} |"
        )
    lines += ["", "Pass@1 (completions sampled so far) at each checkpoint:", ""]
    steps = sorted({step for state in states.values() for step, _, _ in curve(state, start)})
    lines.append("| method | " + " | ".join(f"step {step}" for step in steps) + " |")
    lines.append("|---|" + "---:|" * len(steps))
    for method, state in states.items():
        at = {step: (completions, point) for step, completions, point in curve(state, start)}
        cells = [f"{at[s][1]['pass@1']:.3f} ({at[s][0]})" if s in at else "" for s in steps]
        lines.append(f"| {METHODS[method][0]} | " + " | ".join(cells) + " |")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def write_plot(path: Path, states: dict, start: dict, args) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.5))
    for method, state in states.items():
        points = curve(state, start)
        x = [completions for _, completions, _ in points]
        y = [point["pass@1"] for _, _, point in points]
        axes.plot(x, y, marker="o", label=METHODS[method][0])
        axes.fill_between(x, [p["ci95"][0] for _, _, p in points], [p["ci95"][1] for _, _, p in points], alpha=0.15)
    axes.set_xlabel("completions sampled during training")
    axes.set_ylabel(f"held-out pass@1 (levels {EVAL_LEVELS[0]}-{EVAL_LEVELS[-1]})")
    axes.set_title(f"Sample efficiency on the synthetic task ({args.steps} steps, shaded: 95% CI)")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)


# ---------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=REPO / "artifacts" / "demo" / "sft", help="cold-start model")
    parser.add_argument("--steps", type=int, default=None, help="optimizer steps per method (default 100; fast: 4)")
    parser.add_argument("--save-steps", type=int, default=None, help="checkpoint interval (default 25; fast: 2)")
    parser.add_argument("--methods", default=",".join(METHODS), help=f"comma-separated, of {', '.join(METHODS)}")
    parser.add_argument("--output-dir", type=Path, default=None, help="default artifacts/bench/sample_efficiency")
    parser.add_argument("--table", type=Path, default=None, help="default artifacts/bench/sample_efficiency.md")
    parser.add_argument("--plot", type=Path, default=None, help="default docs/img/sample_efficiency.png")
    parser.add_argument("--eval-problems", type=int, default=None, help="held-out problems per level (default 50)")
    parser.add_argument("--eval-samples", type=int, default=None, help="samples per problem (default 8)")
    parser.add_argument("--seed", type=int, default=0, help="training and sampling seed, the same for all methods")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (training and evaluation)")
    parser.add_argument("--fast", action="store_true", help="a smoke run: 4 steps, 2 problems per level")
    args = parser.parse_args(argv)
    args.steps = args.steps or (4 if args.fast else 100)
    args.save_steps = args.save_steps or (2 if args.fast else 25)
    args.eval_problems = args.eval_problems or (2 if args.fast else 50)
    args.eval_samples = args.eval_samples or (2 if args.fast else 8)
    bench = REPO / "artifacts" / "bench"
    args.output_dir = args.output_dir or bench / ("sample_efficiency_fast" if args.fast else "sample_efficiency")
    default_table, default_plot = bench / "sample_efficiency.md", REPO / "docs" / "img" / "sample_efficiency.png"
    if args.fast:  # a smoke run never overwrites the published table and plot
        default_table, default_plot = (
            args.output_dir / "sample_efficiency.md",
            args.output_dir / "sample_efficiency.png",
        )
    args.table, args.plot = args.table or default_table, args.plot or default_plot
    args.methods = [method.strip() for method in args.methods.split(",") if method.strip()]
    unknown = sorted(set(args.methods) - set(METHODS))
    if unknown:
        parser.error(f"unknown method(s) {unknown}; choose from {', '.join(METHODS)}")
    if args.steps % args.save_steps:
        logger.warning("--steps is not a multiple of --save-steps: the final model is evaluated as well")
    return args


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    import torch
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    from tasks.synthetic import generate_rows

    hf_logging.disable_progress_bar()
    torch.set_num_threads(args.threads)
    from recipes.common.model import resolve_model_path

    resolve_model_path(str(args.model), if_missing="cold_start")  # the demo's cold start, built when missing
    args.output_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    rows = generate_rows(EVAL_LEVELS, args.eval_problems, seed=args.seed, split="eval")

    start_file = args.output_dir / "cold_start_eval.json"
    start = reuse(start_file, args)
    if start is None:
        logger.info("evaluating the cold-start model %s on %d held-out problems", args.model, len(rows))
        start = {**evaluate(args.model, tokenizer, rows, args), "settings": settings(args)}
        start_file.write_text(json.dumps(start, indent=1))

    states: dict[str, dict] = {}
    for method in args.methods:
        run_dir = args.output_dir / method
        done = run_dir / "eval.json"
        saved = reuse(done, args)
        if saved and saved.get("done"):
            logger.info("[%s] %s exists: skipped", method, done)
            states[method] = saved
        else:
            started = time.time()
            train(method, args, run_dir)
            states[method] = evaluate_run(method, run_dir, tokenizer, rows, args)
            logger.info("[%s] done in %.1f min", method, (time.time() - started) / 60)
        write_table(args.table, states, start, args)
        write_plot(args.plot, states, start, args)
    print(args.table.read_text())
    logger.info("table: %s; plot: %s", args.table, args.plot)
    return {"cold_start": start, **states}


if __name__ == "__main__":
    main()
