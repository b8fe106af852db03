"""The demo's stages (scripts/demo.py): each one runs a recipe through its own command line (make_parser) or
the filter pipeline, in order, and is skipped when its output is complete; evaluations and rejection sampling
run beside the main line in a second process.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from recipes.common.command_line.config import CONFIG_DIR, setup_logging  # noqa: E402

logger = logging.getLogger("demo")

EVAL_LEVELS = list(range(1, 13))
TRAINED_LEVELS = [1, 2, 3, 4]  # the cold start's levels
HARD_LEVELS = list(range(5, 13))  # never seen in SFT: where RL has room
RL_POOL = "synthetic:1-10"  # the filter keeps what the cold-start model solves sometimes


STAGE_NAMES = {
    "base": "base (untrained)",
    "sft": "cold-start SFT (levels 1-4)",
    "dapo": "DAPO (pass-rate-filtered pool, levels 1-10)",
    "rs": "rejection-sampling SFT, 1 round",
    "distill": "distilled student (0.25 M, pruned from the teacher)",
    "dapo_random": "control: DAPO with a random reward",
}


def run_recipe(recipe, argv: list[str]) -> Path:
    """A recipe run as its command line parses it (`make_parser()`), in this process: a mistake raises."""
    return Path(recipe.main(*recipe.make_parser().parse_args(argv)))


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
        from recipes.common.model.tiny import build_tiny_model

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
        extra += list(getattr(self.args, "rl_flags", None) or [])  # recipe flags of a caller's own (bench/staleness.py)
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
            extra += ["--dataset_num_rows", "2", "--max_steps", "2", "--sampling", "{n: 2, max_new_tokens: 16}"]
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
        # student of that size trained from scratch needs two thousand (recipes/stages/distill/prune.py).
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
            config["sampling"]["max_new_tokens"] = 16
            config["verify_traces"] = False
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
