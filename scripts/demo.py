"""The whole R1 pipeline in miniature, on a CPU: every stage run by the repo's own recipes, every stage evaluated
with one protocol, and a report.

    make demo                                   # or: python scripts/demo.py
    python scripts/demo.py --control random-reward   # add the RL stage trained on a coin-flip reward
    python scripts/demo.py --fast               # a smoke run in about a minute (the test suite runs it)

Stages, each writing a folder under --output-dir (default artifacts/demo):

    base      the tiny embedded model, untrained                 recipes/common/tiny_model.py
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
import json
import logging
import os
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from recipes.common.config import CONFIG_DIR, setup_logging  # noqa: E402

logger = logging.getLogger("demo")

EVAL_LEVELS = list(range(1, 13))
TRAINED_LEVELS = [1, 2, 3, 4]  # the cold start's levels
HARD_LEVELS = list(range(5, 13))  # never seen in SFT: where RL has room
RL_POOL = "synthetic:1-10"  # the filter keeps what the cold-start model solves sometimes


def run_recipe(recipe, argv: list[str]) -> Path:
    """A recipe run as its command line parses it (`make_parser()`), in this process: a mistake raises."""
    return Path(recipe.main(*recipe.make_parser().parse_args(argv)))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output-dir", type=Path, default=REPO / "artifacts" / "demo")
    parser.add_argument("--seed", type=int, default=0)
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
    return parser.parse_args(argv)


class Demo:
    """The stages, in order; each one returns its folder and is skipped when that folder is complete."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.out = args.output_dir
        self.fast = args.fast
        self.seed = args.seed
        self.timings: dict[str, float] = {}
        self.eval_problems = args.eval_problems or (2 if self.fast else 16)
        self.eval_samples = args.eval_samples or (4 if self.fast else 16)

    # ------------------------------------------------------------------ helpers

    def done(self, stage: str, marker: Path) -> bool:
        """Whether the stage's output is complete; with --force, what a previous run left there is removed."""
        if marker.exists() and not self.args.force:
            logger.info("[%s] %s exists: skipped", stage, marker.parent)
            return True
        if self.args.force and marker.parent.is_dir() and marker.parent != self.out:
            shutil.rmtree(marker.parent)  # the recipes resume from what they find: --force means from nothing
        logger.info("[%s] running", stage)
        return False

    def timed(self, stage: str, function, *args):
        started = time.time()
        result = function(*args)
        self.timings[stage] = self.timings.get(stage, 0.0) + time.time() - started
        return result

    def recipe_argv(self, config: str | Path, output: Path, model: Path, extra: list[str]) -> list[str]:
        config = Path(config)
        config = config if config.is_absolute() else CONFIG_DIR / config
        argv = ["--config", str(config), "--model_name_or_path", str(model), "--output_dir", str(output)]
        return argv + ["--seed", str(self.seed), "--disable_tqdm", "false", *extra]

    # ------------------------------------------------------------------ stages

    def base(self) -> Path:
        from recipes.common.tiny_model import build_tiny_model

        path = self.out / "base"
        if self.done("base", path / "config.json"):
            return path
        return build_tiny_model(path, seed=self.seed)

    def sft(self, base: Path) -> Path:
        from recipes import sft

        output = self.out / "sft"
        if self.done("sft", output / "run_card.json"):
            return output
        extra = ["--max_steps", "8", "--dataset_num_rows", "64", "--logging_steps", "4"] if self.fast else []
        argv = self.recipe_argv("demo/sft.yaml", output, base, extra + (["--save_strategy", "no"] if self.fast else []))
        return run_recipe(sft, argv)

    def filter(self, model: Path) -> Path:
        """The RL pool: problems of levels 5-10 that the cold-start model solves sometimes (1/8 .. 7/8 of samples)."""
        from data_filters.pipeline import run_pipeline

        output = self.out / "filter" / "rl_pool.jsonl"
        if self.done("filter", output):
            return output
        samples = 2 if self.fast else 8
        config = {
            "input": {
                "dataset_name": self.args.rl_pool,
                "dataset_num_rows": 2 if self.fast else self.args.pool_problems,
                "dataset_seed": 1,
            },
            "model": {"name_or_path": str(model), "backend": "transformers", "batch_size": 256},
            "steps": [
                {"step": "dedup"},
                {
                    "step": "pass_rate",
                    "n": samples,
                    "temperature": 1.0,
                    "max_new_tokens": 96,
                    "seed": self.seed,
                    "keep": "window",
                    "lo": 0.0 if self.fast else 1 / samples,
                    "hi": 1.0 if self.fast else 1 - 1 / samples,
                },
            ],
            "output": {"path": str(output)},
        }
        run_pipeline(config)
        return output

    def rl(self, model: Path, pool: Path, name: str = "dapo", random_reward: bool = False) -> Path:
        """DAPO through recipes/grpo.py with its demo config; `random_reward` swaps the verifier for a coin flip."""
        import yaml

        from recipes import grpo

        output = self.out / name
        if self.done(name, output / "run_card.json"):
            return output
        config = yaml.safe_load((CONFIG_DIR / "demo" / "dapo.yaml").read_text())
        config["dataset_name"] = str(pool)
        config.pop("dataset_num_rows", None)  # the filtered pool, whole
        if random_reward:
            config["rewards"] = [
                {"name": "random", "weight": 1.0, "p": 0.5, "seed": self.seed}
                if reward["name"] == "math_accuracy"
                else reward
                for reward in config["rewards"]
            ]
        output.mkdir(parents=True, exist_ok=True)
        config_path = output / "demo_config.yaml"
        config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        extra = []
        if self.fast:
            extra = ["--max_steps", "2", "--num_generations", "2", "--per_device_train_batch_size", "4"]
            extra += ["--max_completion_length", "16", "--save_strategy", "no", "--logging_steps", "1"]
        argv = self.recipe_argv(config_path, output, model, extra)
        return run_recipe(grpo, argv)

    def rejection_sampling(self, model: Path) -> Path:
        """One round of RFT from the DAPO model on the hard levels: sample, keep verified, fine-tune."""
        from recipes import rejection_sampling as rs

        output = self.out / "rs"
        if self.done("rs", output / "summary.json"):
            return Path(json.loads((output / "summary.json").read_text())["final_model"])
        extra = ["--num_rounds", "1", "--dataset_name", "synthetic:5-12", "--dataset_seed", "3"]
        extra += ["--eval_samples_per_problem", "0"]  # the demo evaluates every stage itself
        if self.fast:
            extra += ["--dataset_num_rows", "2", "--samples_per_problem", "2", "--max_steps", "2"]
            extra += ["--sample_max_new_tokens", "16"]
        else:
            extra += ["--dataset_num_rows", "60"]
        argv = self.recipe_argv("demo/rejection_sampling.yaml", output, model, extra)
        return run_recipe(rs, argv)

    def distill(self, teacher: Path) -> Path:
        """Offline distillation of the DAPO model into a student cut from it, on the teacher's verified traces."""
        from recipes import distill

        output = self.out / "distill"
        if self.done("distill", output / "distill_stats.json"):
            return Path(json.loads((output / "distill_stats.json").read_text())["final_student"])
        import yaml

        # The student is cut from the teacher (a quarter of its MLP width: 0.25 M of 0.54 M parameters) and
        # recovered on the teacher's verified traces: Minitron's prune-then-distill, a few hundred steps where a
        # student of that size trained from scratch needs two thousand (recipes/common/prune.py).
        config = yaml.safe_load((CONFIG_DIR / "demo" / "distill.yaml").read_text())
        config.pop("student_spec", None)
        config.update(
            student_prune={"intermediate_size": 128},
            teacher_model_name_or_path=str(teacher),
            mode="offline",
            eval_samples_per_problem=0,  # the demo evaluates every stage itself
            dataset_name="synthetic:1-8",  # the levels the DAPO teacher solves often enough to teach
            dataset_num_rows=2 if self.fast else 600,
            max_steps=2 if self.fast else 300,
        )
        if self.fast:  # a model trained for 8 steps writes no correct trace; the plumbing runs on unverified ones
            config.update(sample_max_new_tokens=16, verify_traces=False)
        output.mkdir(parents=True, exist_ok=True)
        config_path = output / "demo_config.yaml"
        config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        argv = ["--config", str(config_path), "--output_dir", str(output), "--seed", str(self.seed)]
        return run_recipe(distill, argv)

    def eval_argv(self, stage: str, model: Path) -> list[str]:
        """eval/evaluate.py on the held-out levels 1-12: n samples per problem at temperature 1, pass@k and maj@k."""
        levels = f"synthetic:{EVAL_LEVELS[0]}-{EVAL_LEVELS[-1]}"
        argv = ["--model", str(model), "--dataset", levels, "--num-rows", str(self.eval_problems)]
        argv += ["--n", str(self.eval_samples), "--temperature", "1.0", "--top-p", "1.0"]
        argv += ["--max-new-tokens", "16" if self.fast else "96", "--backend", "transformers"]
        return argv + ["--batch-size", "256", "--seeds", str(self.seed), "--output-dir", str(self.out / "eval" / stage)]

    # ------------------------------------------------------------------ the run

    def run(self) -> dict:
        """The stages in order, on the main line: base -> SFT -> filter -> DAPO -> distillation (each needs the one
        before it). With --jobs 2 a second process takes what hangs off that line: every model's evaluation, as
        soon as the model exists, and rejection sampling (from the DAPO model, beside the distillation). Every
        result is on disk when its stage ends: an interrupted run keeps them."""
        self.out.mkdir(parents=True, exist_ok=True)
        models: dict[str, Path] = {}
        with Background(self.args.jobs, self.args.background_threads) as background:

            def evaluate(name: str, model: Path) -> Path:
                models[name] = model
                argv = self.eval_argv(name, model)
                background.submit(f"eval {name}", evaluate_stage, name, self.out, argv, self.args.force)
                return model

            evaluate("base", self.timed("base", self.base))
            evaluate("sft", self.timed("sft", self.sft, models["base"]))
            pool = self.timed("filter", self.filter, models["sft"])
            evaluate("dapo", self.timed("dapo", self.rl, models["sft"], pool))
            if "rs" not in self.args.skip:
                background.submit("rs", run_stage, self.args, "rejection_sampling", models["dapo"])
            if "distill" not in self.args.skip:
                # R1's small models learned from samples of its RL checkpoint (the rejection-sampling data)
                evaluate("distill", self.timed("distill", self.distill, models["dapo"]))
            if "rs" not in self.args.skip:
                evaluate("rs", background.result("rs"))
            if "random-reward" in self.args.control:
                evaluate("dapo_random", self.timed("dapo_random", self.rl, models["sft"], pool, "dapo_random", True))
            results = background.results()
        self.timings.update(background.timings)
        order = [name for name in STAGE_NAMES if name in models]
        return {"models": models, "results": {name: results[f"eval {name}"] for name in order}, "pool": pool}


def evaluate_stage(stage: str, out: Path, argv: list[str], force: bool) -> dict:
    """One stage's evaluation (skipped when its summary exists): the summary and the per-problem records."""
    from eval import evaluate

    folder = out / "eval" / stage
    existing = sorted(folder.glob("*/summary.json"))
    if existing and not force:
        logger.info("[eval %s] %s exists: skipped", stage, existing[0])
    else:
        evaluate.main([*argv, "--overwrite"])
        existing = sorted(folder.glob("*/summary.json"))
    summary = json.loads(existing[0].read_text())
    per_problem = [json.loads(line) for line in (existing[0].parent / "per_problem.jsonl").open()]
    return {"summary": summary, "per_problem": per_problem}


def run_stage(args: argparse.Namespace, name: str, *inputs):
    """A Demo stage in a worker process."""
    return getattr(Demo(args), name)(*inputs)


def _in_worker(threads: int, function, *args):
    import torch

    setup_logging()
    torch.set_num_threads(threads)
    started = time.time()
    return function(*args), time.time() - started


class Background:
    """Work that runs beside the main line of stages: in one worker process per extra job, or inline when
    --jobs is 1. `submit` returns a key; `result(key)` waits for it; `results()` waits for all."""

    def __init__(self, jobs: int, threads: int):
        self.jobs, self.threads = jobs, threads
        self.pending: dict[str, object] = {}
        self.done: dict[str, object] = {}
        self.timings: dict[str, float] = {}
        self.executor = None

    def __enter__(self):
        if self.jobs > 1:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            # spawn, not fork: the main process holds torch threads and, later, open math-worker pipes
            self.executor = ProcessPoolExecutor(self.jobs - 1, mp_context=multiprocessing.get_context("spawn"))
        return self

    def __exit__(self, *exc):
        if self.executor is not None:
            self.executor.shutdown(wait=exc[0] is None, cancel_futures=exc[0] is not None)

    def submit(self, key: str, function, *args) -> str:
        if self.executor is None:
            self.done[key], self.timings[key] = _in_worker(self.threads, function, *args)
        else:
            self.pending[key] = self.executor.submit(_in_worker, self.threads, function, *args)
        return key

    def result(self, key: str):
        if key in self.pending:
            self.done[key], self.timings[key] = self.pending.pop(key).result()
        return self.done[key]

    def results(self) -> dict:
        for key in list(self.pending):
            self.result(key)
        return dict(self.done)


# ---------------------------------------------------------------------- report

STAGE_NAMES = {
    "base": "base (untrained)",
    "sft": "cold-start SFT (levels 1-4)",
    "dapo": "DAPO (pass-rate-filtered pool, levels 1-10)",
    "rs": "rejection-sampling SFT, 1 round",
    "distill": "distilled student (0.25 M, pruned from the teacher)",
    "dapo_random": "control: DAPO with a random reward",
}


def level_stats(per_problem: list[dict], levels: list[int], metric: str = "pass@1") -> dict:
    from eval.metrics import bootstrap_ci

    values = [p[metric] for p in per_problem if p["scored"] and p["difficulty"] in levels]
    if not values:
        return {"mean": float("nan"), "ci95": [float("nan"), float("nan")], "problems": 0}
    low, high = bootstrap_ci(values)
    return {"mean": sum(values) / len(values), "ci95": [low, high], "problems": len(values)}


def stop_rate(evaluation: dict) -> float:
    return 1.0 - evaluation["summary"]["truncation_rate"]


def summarize_stages(results: dict[str, dict], k_max: int) -> dict:
    table = {}
    for stage, evaluation in results.items():
        per_problem = evaluation["per_problem"]
        table[stage] = {
            "pass@1 (1-4)": level_stats(per_problem, TRAINED_LEVELS),
            "pass@1 (5-12)": level_stats(per_problem, HARD_LEVELS),
            f"pass@{k_max} (5-12)": level_stats(per_problem, HARD_LEVELS, f"pass@{k_max}"),
            f"maj@{k_max} (5-12)": level_stats(per_problem, HARD_LEVELS, f"maj@{k_max}"),
            "by_level": {level: level_stats(per_problem, [level])["mean"] for level in EVAL_LEVELS},
            "stop_rate": stop_rate(evaluation),
            "mean_tokens": evaluation["summary"]["mean_tokens"],
        }
    return table


def _cell(stat: dict) -> str:
    low, high = stat["ci95"]
    return f"{stat['mean']:.3f} [{low:.3f}, {high:.3f}]"


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.open()] if path.is_file() else []


def plot_training(runs: dict[str, Path], path: Path) -> Path | None:
    """Reward, mean within-group reward std, zero-std group fraction and entropy per step of the RL runs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        ("reward", "mean reward"),
        ("groups/std_mean", "mean within-group reward std"),
        ("groups/zero_std_frac", "zero-std group fraction"),
        ("entropy", "token entropy"),
    ]
    curves = {name: _read_jsonl(folder / "metrics.jsonl") for name, folder in runs.items()}
    if not any(curves.values()):
        return None
    figure, axes = plt.subplots(1, len(panels), figsize=(4.0 * len(panels), 3.2))
    for axis, (key, title) in zip(axes, panels, strict=True):
        for name, records in curves.items():
            points = [(r["step"], r[key]) for r in records if key in r]
            if points:
                axis.plot(*zip(*points, strict=True), marker=".", label=STAGE_NAMES.get(name, name))
        axis.set_title(title, fontsize=10)
        axis.set_xlabel("step")
        axis.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def write_report(demo: Demo, run: dict, wall_minutes: float, threads: int) -> str:
    from eval.evaluate import plot_pass_at_k

    results = run["results"]
    k_max = demo.eval_samples
    ks = [2**i for i in range(k_max.bit_length()) if 2**i <= k_max]
    table = summarize_stages(results, k_max)
    out = demo.out
    labels = {STAGE_NAMES.get(stage, stage): evaluation["summary"] for stage, evaluation in results.items()}
    plot_pass_at_k(labels, ks, out / "pass_at_k.png", "held-out synthetic levels 1-12, all stages")
    rl_runs = {name: Path(run["models"][name]) for name in ("dapo", "dapo_random") if name in run["models"]}
    curves = plot_training(rl_runs, out / "grpo_curves.png")

    lines = ["# rlvr-recipes demo: the R1 pipeline in miniature", ""]
    lines += [
        f"Held-out problems of the synthetic task (eval split): {demo.eval_problems} per level, levels 1-12, "
        f"{k_max} samples each at temperature 1.0, up to {16 if demo.fast else 96} new tokens, seed {demo.seed}. "
        "pass@k is the unbiased estimator, maj@k votes over answers grouped by the verifier; brackets are 95% "
        "bootstrap intervals over problems. Levels 1-4 are those of the cold start; 5-12 were never in SFT data.",
        "",
        f"| stage | pass@1, levels 1-4 | pass@1, levels 5-12 | pass@{k_max}, 5-12 | maj@{k_max}, 5-12 | stops at EOS |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for stage, row in table.items():
        lines.append(
            f"| {STAGE_NAMES.get(stage, stage)} | {_cell(row['pass@1 (1-4)'])} | {_cell(row['pass@1 (5-12)'])} | "
            f"{_cell(row[f'pass@{k_max} (5-12)'])} | {row[f'maj@{k_max} (5-12)']['mean']:.3f} | "
            f"{row['stop_rate']:.0%} |"
        )
    lines += ["", "pass@1 per level:", ""]
    stages = list(table)
    lines += ["| level | " + " | ".join(stages) + " |", "|---:|" + "---:|" * len(stages)]
    for level in EVAL_LEVELS:
        lines.append(f"| {level} | " + " | ".join(f"{table[s]['by_level'][level]:.3f}" for s in stages) + " |")
    lines += ["", *verdicts(table), ""]
    lines += ["![pass@k of every stage](pass_at_k.png)", ""]
    if curves:
        lines += ["![GRPO training curves](grpo_curves.png)", ""]
    lines += budget_section(demo, run)
    lines += stage_notes(demo, run)
    lines += ["", "Wall time per stage (s): " + ", ".join(f"{k} {v:.0f}" for k, v in demo.timings.items())]
    lines += [f"Total: {wall_minutes:.1f} min, {demo.args.jobs} process(es) at once, {threads} thread(s) in all.", ""]
    text = "\n".join(lines)
    (out / "report.md").write_text(text)
    (out / "report.json").write_text(json.dumps({"stages": table, "timings": demo.timings}, indent=2))
    return text


def budget_section(demo: Demo, run: dict) -> list[str]:
    """Accuracy against thinking budget of the cold start and DAPO models (eval/budget.py: s1's forcing). The
    task's chains grow with the level (about 3 tokens a hop), so a budget cuts the hard levels first."""
    from eval import evaluate
    from eval.budget import format_curve_table, plot_budget_curves

    budgets = [4, 16] if demo.fast else [4, 8, 16, 32, 64]
    curves = {}
    for stage in [stage for stage in ("sft", "dapo") if stage in run["models"]]:
        out = demo.out / "eval_budget" / stage
        saved = out / "budget_curve" / f"synthetic_{EVAL_LEVELS[0]}-{EVAL_LEVELS[-1]}.json"
        if demo.args.force or not saved.exists():
            argv = demo.eval_argv(stage, run["models"][stage])[:-2] + ["--output-dir", str(out), "--overwrite"]
            evaluate.main([*argv, "--budgets", *map(str, budgets)])
        curves[STAGE_NAMES.get(stage, stage)] = json.loads(saved.read_text())
    if not curves:
        return []
    ks = [1, demo.eval_samples]
    plot_budget_curves(curves, ks, demo.out / "budget_curve.png", "held-out levels 1-12: accuracy vs thinking budget")
    return [
        "## Thinking budget",
        "",
        "The same held-out problems with thinking cut at each budget: a sample still thinking there gets `</think>` "
        "and `\\boxed{` appended and 16 tokens to answer (s1's budget forcing). forced: samples cut at the budget.",
        "",
        format_curve_table(curves, ks, "model"),
        "",
        "![accuracy against thinking budget](budget_curve.png)",
        "",
    ]


def verdicts(table: dict) -> list[str]:
    """Plain sentences: did each stage beat the one before it, and is the RL gain outside the noise?"""
    lines = []

    def gain(a: str, b: str, key: str) -> str:
        x, y = table[a][key], table[b][key]
        separated = y["ci95"][0] > x["ci95"][1] or y["ci95"][1] < x["ci95"][0]
        return f"{y['mean'] - x['mean']:+.3f} ({'intervals do not overlap' if separated else 'intervals overlap'})"

    if "sft" in table:
        lines.append(f"- Cold start over base, pass@1 on levels 1-4: {gain('base', 'sft', 'pass@1 (1-4)')}.")
    if "dapo" in table:
        lines.append(f"- DAPO over cold start, pass@1 on levels 5-12: {gain('sft', 'dapo', 'pass@1 (5-12)')}.")
    if "dapo_random" in table:
        lines.append(
            f"- Random-reward control over cold start, levels 5-12: {gain('sft', 'dapo_random', 'pass@1 (5-12)')}; "
            "the gap between the two RL rows is what the verifier's reward explains."
        )
    if "rs" in table and "dapo" in table:
        lines.append(f"- Rejection sampling over DAPO, levels 5-12: {gain('dapo', 'rs', 'pass@1 (5-12)')}.")
    if "distill" in table and "dapo" in table:
        lines.append(
            f"- Distilled student against its teacher (the DAPO model), levels 5-12: {gain('dapo', 'distill', 'pass@1 (5-12)')}."
        )
    return lines


def stage_notes(demo: Demo, run: dict) -> list[str]:
    """What each training stage did, from the files the recipes wrote."""
    lines = ["## Stages", ""]
    report = run["pool"].parent / f"{run['pool'].name}.report.json"
    if report.is_file():
        data = json.loads(report.read_text())
        steps = ", ".join(f"{s['step']} {s['rows_in']} -> {s['rows_out']}" for s in data.get("steps", []))
        lines.append(f"- filter ({demo.args.rl_pool}, cold-start model's pass rate): {steps}.")
    for name in ("dapo", "dapo_random"):
        folder = run["models"].get(name)
        if folder is None:
            continue
        records = _read_jsonl(Path(folder) / "metrics.jsonl")
        card = json.loads((Path(folder) / "run_card.json").read_text())
        warnings = sorted({warning["kind"] for warning in card.get("monitor_warnings") or []})
        text = f"- {name}: {card.get('final_step')} steps"
        logged = [r for r in records if "dynamic_sampling/groups_generated" in r]
        if logged:  # each log averages its window of steps; so does this
            generated = sum(r["dynamic_sampling/groups_generated"] for r in logged) / len(logged)
            kept = sum(r["dynamic_sampling/groups_kept_with_variance"] for r in logged) / len(logged)
            rounds = sum(r["dynamic_sampling/extra_rounds"] for r in logged) / len(logged)
            text += (
                f"; dynamic sampling generated {generated:.1f} groups per step on average, {kept:.1f} of them with "
                f"reward variance, in {rounds:.2f} extra generation rounds"
            )
        lines.append(text + f"; monitor warnings: {', '.join(warnings) or 'none'}.")
    summary = demo.out / "rs" / "summary.json"
    if "rs" in run["models"] and summary.is_file():
        card = json.loads((demo.out / "rs" / "run_card.json").read_text())
        keep = card["config"]["script"]["max_per_problem"]
        for stats in json.loads(summary.read_text())["rounds"]:
            lines.append(
                f"- rs, round {stats['round']}: {stats['samples_drawn']} samples for {stats['problems']} problems, "
                f"{stats['samples_correct']} verified correct, {stats['samples_kept']} kept (distinct, at most "
                f"{keep} per problem); "
                f"{stats['problems_solved']} problems solved at least once."
            )
    stats_path = demo.out / "distill" / "distill_stats.json"
    if "distill" in run["models"] and stats_path.is_file():
        stats = json.loads(stats_path.read_text())
        offline = stats.get("offline") or {}
        lines.append(
            f"- distill: the DAPO model wrote {offline.get('traces_drawn')} traces, {offline.get('traces_kept')} "
            f"verified and kept; the student ({student_size(stats)}), cut from the teacher, was fine-tuned on them."
        )
    return lines


def student_size(stats: dict) -> str:
    from transformers import AutoConfig

    try:
        student = AutoConfig.from_pretrained(stats["final_student"])
        teacher = AutoConfig.from_pretrained(stats["teacher"])
    except (OSError, KeyError):
        return "a smaller model"
    return (
        f"hidden {student.hidden_size}, MLP {student.intermediate_size}, {student.num_hidden_layers} layers; the "
        f"teacher: hidden {teacher.hidden_size}, MLP {teacher.intermediate_size}, {teacher.num_hidden_layers} layers"
    )


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    setup_logging()
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
