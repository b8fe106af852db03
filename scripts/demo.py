"""The embedded-default pipeline on a CPU: tiny base model -> cold-start SFT on easy levels -> pass@1 before and after.

    make demo                        # or: python scripts/demo.py
    python scripts/demo.py --fast    # a smoke run in about a minute (the test suite runs it)

Stages write into --output-dir (default artifacts/demo) and are skipped when their output is already
there, so a rerun only redoes what is missing (--force redoes everything). The same recipe code serves
a 7B model; only the YAML differs. Later stages of the R1 pipeline (GRPO/DAPO, rejection sampling,
distillation) join this script as their recipes land.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from recipes.common.config import CONFIG_DIR, setup_logging  # noqa: E402

logger = logging.getLogger("demo")

EVAL_LEVELS = list(range(1, 13))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output-dir", type=Path, default=REPO / "artifacts" / "demo")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--fast", action="store_true", help="tiny budgets everywhere: checks the plumbing, not learning"
    )
    parser.add_argument("--force", action="store_true", help="redo every stage even when its output exists")
    parser.add_argument("--eval-problems", type=int, default=None, help="held-out problems per level (default 50)")
    parser.add_argument("--eval-samples", type=int, default=None, help="samples per problem (default 8)")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch CPU threads for this single process (default: the machine's cores, at most 4)",
    )
    return parser.parse_args(argv)


def build_base(path: Path, seed: int, force: bool) -> Path:
    from recipes.common.tiny_model import build_tiny_model

    if (path / "config.json").is_file() and not force:
        logger.info("[base] %s exists: skipped", path)
        return path
    logger.info("[base] building the tiny model")
    return build_tiny_model(path, seed=seed)


def run_sft(base: Path, output: Path, seed: int, fast: bool, force: bool) -> Path:
    """Cold-start SFT through the recipe itself (recipes/sft.py with its demo YAML)."""
    from trl import ModelConfig, SFTConfig

    from recipes import sft
    from recipes.common.config import parse_recipe_args

    if (output / "run_card.json").is_file() and not force:
        logger.info("[sft] %s exists: skipped", output)
        return output
    overrides = ["--model_name_or_path", str(base), "--output_dir", str(output), "--seed", str(seed)]
    if fast:
        overrides += ["--max_steps", "8", "--dataset_num_rows", "64", "--logging_steps", "4", "--save_strategy", "no"]
    argv = ["--config", str(CONFIG_DIR / "demo" / "sft.yaml"), *overrides]
    script_args, training_args, model_args = parse_recipe_args(
        (sft.SFTScriptArguments, SFTConfig, ModelConfig), sft.DEFAULT_CONFIG, argv
    )
    logger.info("[sft] cold start on %s for %d steps", script_args.dataset_name, training_args.max_steps)
    return sft.main(script_args, training_args, model_args)


def evaluate(model_dir: Path, rows: list[dict], samples: int, seed: int, out: Path, force: bool) -> dict:
    """Sampled pass@1 per level (temperature 1, `samples` per problem); cached in `out`."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from eval.runner import sample_and_score, summarize_by_difficulty
    from eval.sampler import SamplingParams, TransformersSampler

    if out.is_file() and not force:
        logger.info("[eval] %s exists: skipped", out)
        return {int(level): value for level, value in json.loads(out.read_text())["by_level"].items()}
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    params = SamplingParams(n=samples, temperature=1.0, max_new_tokens=96, seed=seed)
    results = sample_and_score(TransformersSampler(model, tokenizer, batch_size=256), rows, params)
    summary = summarize_by_difficulty(results)
    out.write_text(json.dumps({"model": str(model_dir), "protocol": params.__dict__, "by_level": summary}, indent=2))
    return summary


def format_table(before: dict, after: dict, problems: int, samples: int) -> str:
    lines = [
        f"Sampled pass@1 on held-out synthetic problems ({problems} per level, {samples} samples each, temperature 1.0)",
        "",
        "| level | base | cold-start SFT | SFT stops at EOS |",
        "|---:|---:|---:|---:|",
    ]
    for level in sorted(after):
        lines.append(
            f"| {level} | {before[level]['pass@1']:.3f} | {after[level]['pass@1']:.3f} | "
            f"{after[level]['stop_rate']:.0%} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    setup_logging()
    import torch

    threads = args.threads or min(4, os.cpu_count() or 1)
    torch.set_num_threads(threads)
    problems = args.eval_problems or (4 if args.fast else 50)
    samples = args.eval_samples or (2 if args.fast else 8)
    out = args.output_dir
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()

    from data_filters.synthetic import generate_rows

    rows = generate_rows(EVAL_LEVELS, problems, seed=args.seed, split="eval")
    base = build_base(out / "base", args.seed, args.force)
    before = evaluate(base, rows, samples, args.seed, out / "eval_base.json", args.force)
    sft_dir = run_sft(base, out / "sft", args.seed, args.fast, args.force)
    after = evaluate(sft_dir, rows, samples, args.seed, out / "eval_sft.json", args.force)

    table = format_table(before, after, problems, samples)
    minutes = (time.time() - started) / 60
    report = out / "report.md"
    report.write_text(f"# rlvr-recipes demo\n\n{table}\n\nWall time: {minutes:.1f} min on {threads} thread(s).\n")
    print("\n" + table + f"\n\nreport: {report}  ({minutes:.1f} min)")
    return {"before": before, "after": after}


if __name__ == "__main__":
    main()
