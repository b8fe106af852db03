"""One run of scripts/bench/sample_efficiency.py: the variants (a demo config plus flags), training one
(variant, seed) with recipes/grpo.py, counting the completions it sampled, and evaluating its checkpoints on
the held-out problems. The bench runs each (variant, seed) as `sample_efficiency.py --job VARIANT SEED`, a
child process that calls `run_job` here.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "recipes" / "configs" / "demo"
EVAL_LEVELS = list(range(5, 13))
MAX_NEW_TOKENS = 96  # the demo configs' max_completion_length
DS_MODE = "dynamic_sampling_mode"  # recipes/grpo.py's option for the dapo_ds_* variants


def rewards_flags(config: dict, replace_accuracy: dict | None = None, drop: str | None = None) -> list[str]:
    """--rewards for the config's reward list with math_accuracy replaced, or one reward left out."""
    rewards = [dict(reward) for reward in config["rewards"] if reward["name"] != drop]
    if replace_accuracy is not None:
        rewards = [replace_accuracy if reward["name"] == "math_accuracy" else reward for reward in rewards]
    return ["--rewards", json.dumps(rewards)]


class Variant(NamedTuple):
    label: str
    config: Path
    parent: str | None  # the variant it is compared with, paired on seeds
    flags: Callable[[dict, int], list[str]]  # (its YAML config, seed) -> flags on top of the config
    needs: str | None = None  # a recipes/grpo.py option this variant needs


def _none(config: dict, seed: int) -> list[str]:
    return []


GRPO, DAPO = CONFIGS / "grpo.yaml", CONFIGS / "dapo.yaml"
VARIANTS = {
    "grpo": Variant("GRPO", GRPO, None, _none),
    "dapo": Variant("DAPO", DAPO, None, _none),
    "dr_grpo": Variant("Dr. GRPO", CONFIGS / "dr_grpo.yaml", "grpo", _none),
    "dapo_no_ds": Variant("DAPO without dynamic sampling", DAPO, "dapo", lambda c, s: ["--dynamic_sampling", "false"]),
    "grpo_beta0": Variant("GRPO with beta 0 (no KL)", GRPO, "grpo", lambda c, s: ["--beta", "0.0"]),
    "dapo_no_clip_higher": Variant(
        "DAPO without clip-higher", DAPO, "dapo", lambda c, s: ["--epsilon_high", str(c["epsilon"])]
    ),
    "dapo_no_overlong": Variant(
        "DAPO without the overlong reward", DAPO, "dapo", lambda c, s: rewards_flags(c, drop="overlong")
    ),
    "dapo_filter_sum": Variant(
        "DAPO, dynamic sampling on the summed reward", DAPO, "dapo", lambda c, s: ["--variance_rewards", "sum"]
    ),
    "random_reward": Variant(
        "DAPO with a random 0/1 reward (control)",
        DAPO,
        "dapo",
        lambda c, s: rewards_flags(c, replace_accuracy={"name": "random", "weight": 1.0, "p": 0.5, "seed": s}),
    ),
    "format_only": Variant(
        "DAPO with a format-only reward (control)",
        DAPO,
        "dapo",
        lambda c, s: rewards_flags(c, replace_accuracy={"name": "format_only", "weight": 1.0}),
    ),
    **{
        f"dapo_ds_{mode}": Variant(
            f"DAPO, dynamic sampling mode {mode}",
            DAPO,
            "dapo",  # batch is dapo.yaml's own mode: dapo_ds_batch must match dapo
            lambda c, s, mode=mode: [f"--{DS_MODE}", mode],
            needs=DS_MODE,
        )
        for mode in ("batch", "reference", "adaptive")
    },
}
DEFAULT_VARIANTS = [
    "grpo", "dapo", "dr_grpo", "dapo_no_ds", "grpo_beta0", "dapo_no_clip_higher", "dapo_no_overlong",
    "dapo_filter_sum", "random_reward", "format_only",
]  # fmt: skip
DYNAMIC_SAMPLING_OFF = {"grpo", "dr_grpo", "dapo_no_ds", "grpo_beta0"}  # the cost model's plain steps


logger = logging.getLogger("bench.sample_efficiency")


# ---------------------------------------------------------------- one run


def run_child(argv: list[str], log: Path, label: str, threads: int) -> int:
    """`python argv...` in a child process with `threads` torch threads, its output appended to `log`: one run of
    a seeded bench, whose crash stops only that run. Returns the exit status."""
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
           "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}  # fmt: skip
    logger.info("[%s] started (log: %s)", label, log)
    started = time.time()
    with open(log, "a") as handle:
        code = subprocess.run(
            [sys.executable, *argv], cwd=REPO, env=env, stdout=handle, stderr=subprocess.STDOUT
        ).returncode
    logger.info(
        "[%s] %s in %.1f min", label, "done" if code == 0 else f"FAILED (exit {code})", (time.time() - started) / 60
    )
    return code


def grpo_argv(name: str, seed: int, args, run_dir: Path, variants: dict | None = None) -> list[str]:
    """recipes/grpo.py's command line for one (variant, seed); `variants`: another bench's table (default VARIANTS)."""
    import yaml

    variant = (variants or VARIANTS)[name]
    config = yaml.safe_load(variant.config.read_text())
    argv = [
        "--config", str(variant.config), *variant.flags(config, seed),
        "--model_name_or_path", str(args.model), "--output_dir", str(run_dir), "--seed", str(seed),
        "--max_steps", str(args.steps), "--save_strategy", "steps", "--save_steps", str(args.save_steps),
        "--save_total_limit", str(args.steps // args.save_steps + 1), "--logging_steps", "1",
        "--demo_model_if_missing", "false", "--report_to", "none", "--disable_tqdm", "true",
    ]  # fmt: skip
    if args.fast:
        argv += ["--dataset_num_rows", "50"]
    if any(run_dir.glob("checkpoint-*")):
        argv += ["--resume_from_checkpoint", "true"]
    return argv


def finished_run(run_dir: Path, model, steps: int, seed: int) -> bool:
    """Whether `run_dir` holds a finished training run (its run card); an error when that run trained another
    model, for other steps or with another seed than this bench asks for."""
    if not (run_dir / "run_card.json").is_file():
        return False
    card = json.loads((run_dir / "run_card.json").read_text())
    found = (card["base_model"], card["final_step"], card["config"]["training"]["seed"])
    if found != (str(model), steps, seed):
        raise SystemExit(f"{run_dir} holds a run of (model, steps, seed) {found}: give another --output-dir, "
                         "or delete it to redo it")  # fmt: skip
    return True


def train(name: str, seed: int, args, run_dir: Path, variants: dict | None = None) -> None:
    """recipes/grpo.py in this (job) process; resumes a cut-off run from its last checkpoint."""
    if finished_run(run_dir, args.model, args.steps, seed):
        return
    from recipes import grpo

    run_dir.mkdir(parents=True, exist_ok=True)
    grpo.cli(grpo_argv(name, seed, args, run_dir, variants))


def step_records(run_dir: Path) -> dict[int, dict]:
    """metrics.jsonl's training-step records by step (a resumed run logs some steps twice: the later counts)."""
    records: dict[int, dict] = {}
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        if "loss" in record:  # a training-step log (the last line is the run summary)
            records[record["step"]] = record
    return records


def completions_by_step(run_dir: Path) -> dict[int, int]:
    """Cumulative completions sampled after each step, from metrics.jsonl (one record per step)."""
    card = json.loads((run_dir / "run_card.json").read_text())
    training = card["config"]["training"]
    per_group = training["num_generations"]
    # Without dynamic sampling a step consumes its share of one generation batch: TRL generates
    # per_device_train_batch_size x processes x steps_per_generation completions every
    # steps_per_generation x num_iterations steps.
    plain = training["per_device_train_batch_size"] * card.get("processes", 1) / training["num_iterations"]
    records = step_records(run_dir)
    total, cumulative = 0.0, {0: 0}
    for step in sorted(records):
        generated = records[step].get("dynamic_sampling/groups_generated")
        total += plain if generated is None else generated * per_group
        cumulative[step] = round(total)
    return cumulative


def completions_per_kept_group(run_dir: Path) -> float | None:
    """Completions sampled per group that reached the loss with reward variance, over the whole run
    (None without dynamic sampling): what dynamic sampling pays for each useful group."""
    card = json.loads((run_dir / "run_card.json").read_text())
    records = [r for r in step_records(run_dir).values() if "dynamic_sampling/groups_generated" in r]
    kept = sum(record["dynamic_sampling/groups_kept_with_variance"] for record in records)
    if not records or not kept:
        return None
    generated = sum(record["dynamic_sampling/groups_generated"] for record in records)
    return generated * card["config"]["training"]["num_generations"] / kept


def sample_held_out(model_dir: Path, tokenizer, rows: list[dict], args) -> tuple[list, object, float, float]:
    """The held-out protocol of the seeded benches (this one, length_penalty, emergence): args.eval_samples
    samples a row at temperature 1, at most MAX_NEW_TOKENS new tokens, the streams seeded by args.eval_seed, so
    every model of a bench is sampled alike. Returns (eval.runner results, the SamplingParams, wall seconds, CPU
    seconds: what the wall time would be on an idle core)."""
    from transformers import AutoModelForCausalLM

    from eval.runner import sample_and_score
    from eval.sampler import SamplingParams, TransformersSampler

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    params = SamplingParams(n=args.eval_samples, temperature=1.0, max_new_tokens=MAX_NEW_TOKENS, seed=args.eval_seed)
    started, cpu = time.time(), time.process_time()
    results = sample_and_score(TransformersSampler(model, tokenizer, batch_size=256), rows, params, progress=False)
    return results, params, time.time() - started, time.process_time() - cpu


def evaluate(model_dir: Path, tokenizer, rows: list[dict], args) -> dict:
    """Pass@1 and pass@n on the held-out rows, with a 95% bootstrap interval over problems."""
    from eval.metrics import bootstrap_ci

    results, params, wall, cpu = sample_held_out(model_dir, tokenizer, rows, args)
    per_problem = [result.pass_at(1) for result in results]
    low, high = bootstrap_ci(per_problem)
    return {
        "pass@1": sum(per_problem) / len(per_problem),
        "ci95": [low, high],
        f"pass@{params.n}": sum(result.pass_at(params.n) for result in results) / len(results),
        "num_correct": [result.num_correct for result in results],
        "protocol": params.__dict__,
        "eval_seconds": wall,
        "eval_cpu_seconds": cpu,
    }


def checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    """(step, folder) of every saved checkpoint, and the final model when its step has no checkpoint."""
    from recipes.common.checkpoints.folders import checkpoint_folders, checkpoint_step

    found = {checkpoint_step(path): path for path in checkpoint_folders(run_dir)}
    card = json.loads((run_dir / "run_card.json").read_text())
    found.setdefault(card["final_step"], run_dir)
    return sorted(found.items())


def settings(args) -> dict:
    """What a saved result depends on (besides its variant and seed): a rerun reuses it only when these agree."""
    keys = ("model", "steps", "save_steps", "eval_problems", "eval_samples", "eval_seed", "fast")
    return {key: str(getattr(args, key)) for key in keys}


def saved_result(path: Path, expected: dict) -> dict | None:
    """The saved result at `path`, when there is one; an error when it was made with other settings than
    `expected` (what the result depends on besides its run: every seeded bench keeps its own)."""
    if not path.is_file():
        return None
    saved = json.loads(path.read_text())
    if saved.get("settings") != expected:
        raise SystemExit(
            f"{path} was made with other settings ({saved.get('settings')}, now {expected}): "
            "give another --output-dir, or delete it to redo it"
        )
    return saved


def reuse(path: Path, args) -> dict | None:
    """This bench's saved result at `path` (saved_result with its settings)."""
    return saved_result(path, settings(args))


def eval_rows(args) -> list[dict]:
    from tasks.synthetic import generate_rows

    return generate_rows(EVAL_LEVELS, args.eval_problems, seed=args.eval_seed, split="eval")


def run_job(name: str, seed: int, args) -> None:
    """One (variant, seed): train, then evaluate every checkpoint into eval.json (or the cold start, once)."""
    import torch
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    torch.set_num_threads(args.threads)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    if name == "cold_start":
        start = evaluate(args.model, tokenizer, eval_rows(args), args)
        (args.output_dir / "cold_start_eval.json").write_text(json.dumps({**start, "settings": settings(args)}))
        return
    run_dir = args.output_dir / name / f"seed{seed}"
    out = run_dir / "eval.json"
    state = reuse(out, args) or {"variant": name, "seed": seed, "settings": settings(args), "points": {}}
    started, cpu = time.time(), time.process_time()
    train(name, seed, args, run_dir)
    state.setdefault("train_wall_seconds", time.time() - started)
    state.setdefault("start_cpu_seconds", cpu)  # the job process's imports and loads before training
    state.setdefault("train_cpu_seconds", time.process_time() - cpu)  # one thread: the wall time on an idle core
    completions = completions_by_step(run_dir)
    rows = eval_rows(args)
    for step, folder in checkpoints(run_dir):
        if str(step) not in state["points"]:
            state["points"][str(step)] = {**evaluate(folder, tokenizer, rows, args), "completions": completions[step]}
            out.write_text(json.dumps(state, indent=1))
    summary = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    runtime = next((record["train_runtime"] for record in reversed(summary) if "train_runtime" in record), None)
    state["train_minutes"] = None if runtime is None else runtime / 60
    state["completions_per_kept_group"] = completions_per_kept_group(run_dir)
    state["done"] = True
    out.write_text(json.dumps(state, indent=1))
