"""Benchmark: reward hacking of a learned reward, watched against the verifier, and what each mitigation buys.

    python scripts/bench/reward_hacking.py [--model tiny|smollm2] [--seeds 0 1 2] [--steps 60] [--jobs 2]
        [--arms verifier orm ...] [--out artifacts/bench/reward_hacking]

One command: it trains the outcome reward models it needs (recipes/reward_model.py on the cold start's own
samples, one per seed, for the ensemble), then runs GRPO from the cold start (recipes/grpo.py) for each arm and
seed with `gold_rewards: [math_accuracy]`, so that every step logs the training (proxy) reward and the
verifier's (gold) reward of the same completions, and the monitor watches them. The arms:

  verifier      the verifier itself is the reward (proxy = gold: the reference curve)
  orm           the ORM trained with seed 0 is the reward
  orm_gate      the ORM behind a format gate: a completion without a readable boxed answer gets the lowest score
  orm_ensemble  the minimum over the ORMs of every seed (a conservative ensemble)
  orm_kl        the ORM with a KL term to the cold start (beta 0.1)
  orm_stop      the ORM with stop_on_reward_hacking: the run stops when the monitor fires and keeps the last
                checkpoint from before the divergence (early stopping on the gold divergence)
  random        a random 0/1 reward (the control: what training on no signal does)

Each final model is then evaluated on held-out problems with the verifier (pass@1, 4 samples each), which
makes the mitigations one number each, with its spread over seeds. Every run is resumable: a finished run
(run_card.json and eval.json present) is skipped, so the command picks up where it stopped. It writes
`results.json`, `report.md` (the table, each seed's figures, where the monitor fired, what the policy writes at
the end) and the plot `reward_hacking.png` (proxy and gold reward per step, one panel per arm, one line per
seed) into --out; `--plot docs/img/reward_hacking.png` copies the plot there.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

MODELS = {
    # the tiny demo: its cold start, its GRPO config, its ORM config, the held-out problems
    "tiny": {
        "policy": "artifacts/demo/sft",
        "grpo": "recipes/configs/demo/grpo.yaml",
        "orm": "recipes/configs/demo/reward_model.yaml",
        "eval": ("synthetic:5-10", 50),
        "max_new_tokens": 96,
        "flags": ["--demo_model_if_missing", "true"],
    },
    # SmolLM2-135M: its cold start (make demo-real builds it), its LoRA DAPO config, its ORM config
    "smollm2": {
        "policy": "artifacts/demo-real/sft",
        "grpo": "recipes/configs/smollm2-135m/dapo_lora.yaml",
        "orm": "recipes/configs/smollm2-135m/reward_model.yaml",
        "eval": ("arithmetic:1-3", 64),
        "max_new_tokens": 256,
        "flags": [],
    },
}
ARMS = ("verifier", "orm", "orm_gate", "orm_ensemble", "orm_kl", "orm_stop", "random")


def arm_flags(arm: str, orms: list[Path], logging_steps: int) -> list[str]:
    """recipes/grpo.py flags of an arm (on top of the model's GRPO config)."""
    orm = {"name": "reward_model", "path": str(orms[0])}
    rewards = {
        "verifier": [{"name": "math_accuracy"}],
        "orm": [orm],
        "orm_gate": [{**orm, "gate": "format"}],
        "orm_ensemble": [{"name": "reward_model", "path": [str(path) for path in orms], "combine": "min"}],
        "orm_kl": [orm],
        "orm_stop": [orm],
        "random": [{"name": "random", "p": 0.5}],
    }[arm]
    flags = ["--rewards", json.dumps(rewards), "--gold_rewards", json.dumps([{"name": "math_accuracy"}])]
    flags += ["--beta", "0.1" if arm == "orm_kl" else "0.0"]
    if arm == "orm_stop":
        flags += ["--stop_on_reward_hacking", "true", "--save_strategy", "steps", "--save_steps", str(logging_steps)]
        flags += ["--save_total_limit", "1000"]
    else:
        flags += ["--save_strategy", "no"]
    return flags


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="tiny")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    parser.add_argument("--steps", type=int, default=60, help="GRPO steps per run")
    parser.add_argument("--logging-steps", type=int, default=2, help="one log (proxy, gold, monitor) per this many")
    parser.add_argument("--patience", type=int, default=3, help="the monitor's window: patience + 1 logs")
    parser.add_argument("--jobs", type=int, default=2, help="runs at once (one core each)")
    parser.add_argument("--out", type=Path, default=None, help="default: artifacts/bench/reward_hacking[_MODEL]")
    parser.add_argument("--plot", type=Path, default=None, help="also copy the plot here")
    parser.add_argument("--report-only", action="store_true", help="summarise the finished runs, train nothing")
    args = parser.parse_args(argv)
    if args.out is None:
        suffix = "" if args.model == "tiny" else f"_{args.model}"
        args.out = REPO / "artifacts" / "bench" / f"reward_hacking{suffix}"
    return args


def _child_env() -> dict:
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


def run_commands(commands: list[tuple[str, list[str], Path]], jobs: int) -> None:
    """Run (name, argv, log) commands, `jobs` at a time; a failure ends the bench naming the log."""
    pending, running = list(commands), []
    while pending or running:
        while pending and len(running) < jobs:
            name, argv, log = pending.pop(0)
            log.parent.mkdir(parents=True, exist_ok=True)
            handle = open(log, "w")
            print(f"[{time.strftime('%H:%M:%S')}] start {name}", flush=True)
            running.append(
                (name, subprocess.Popen(argv, cwd=REPO, env=_child_env(), stdout=handle, stderr=handle), log)
            )
        time.sleep(0.5)
        for item in [item for item in running if item[1].poll() is not None]:
            running.remove(item)
            name, process, log = item
            if process.returncode != 0:
                for _, other, _ in running:
                    other.terminate()
                tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-20:])
                raise SystemExit(f"{name} failed (exit {process.returncode}); the end of {log}:\n{tail}")
            print(f"[{time.strftime('%H:%M:%S')}] done  {name}", flush=True)


def train_orms(args, setup: dict) -> list[Path]:
    """One ORM per seed from the cold start's samples (recipes/reward_model.py), skipped when already trained."""
    folders = [args.out / f"orm_seed{seed}" for seed in args.seeds]
    commands = [
        (
            f"orm seed {seed}",
            [
                sys.executable,
                "recipes/reward_model.py",
                "--config",
                setup["orm"],
                "--seed",
                str(seed),
                "--output_dir",
                str(folder),
                "--model_name_or_path",
                setup["policy"],
                *setup["flags"],
            ],
            folder / "train.log",
        )  # fmt: skip
        for seed, folder in zip(args.seeds, folders, strict=True)
        if not (folder / "orm_metrics.json").is_file()
    ]
    run_commands(commands, args.jobs)
    return folders


def run_dir(args, arm: str, seed: int) -> Path:
    return args.out / arm / f"seed{seed}"


def train_arms(args, setup: dict, orms: list[Path]) -> None:
    commands = []
    for arm in args.arms:
        for seed in args.seeds:
            out = run_dir(args, arm, seed)
            if (out / "run_card.json").is_file():
                continue
            shutil.rmtree(out, ignore_errors=True)  # a run cut short starts again
            argv = [
                sys.executable, "recipes/grpo.py", "--config", setup["grpo"], "--model_name_or_path", setup["policy"],
                *setup["flags"], "--output_dir", str(out), "--seed", str(seed), "--max_steps", str(args.steps),
                "--logging_steps", str(args.logging_steps), "--monitor_patience", str(args.patience),
                "--disable_tqdm", "true", "--report_to", "none", *arm_flags(arm, orms, args.logging_steps),
            ]  # fmt: skip
            commands.append((f"{arm} seed {seed}", argv, out / "train.log"))
    run_commands(commands, args.jobs)


def evaluate(args, setup: dict, model: Path, seed: int) -> dict:
    """Held-out pass@1 of `model` (4 samples per problem) and its first completions, as examples."""
    from eval.runner import sample_and_score
    from eval.sampler import SamplingParams, make_sampler
    from tasks.synthetic import generate_named

    name, per_level = setup["eval"]
    rows = generate_named(name, per_level, seed=1, split="eval")
    sampler = make_sampler("transformers", str(model), batch_size=256)
    params = SamplingParams(n=4, temperature=1.0, max_new_tokens=setup["max_new_tokens"], seed=seed)
    results = sample_and_score(sampler, rows, params, progress=False)
    return {
        "pass@1": sum(result.pass_at(1) for result in results) / len(results),
        "problems": len(results),
        "examples": [
            {"answer": row["answer"], "completion": result.samples[0]["text"], "correct": result.samples[0]["correct"]}
            for row, result in list(zip(rows, results, strict=True))[:3]
        ],
    }


def evaluate_all(args, setup: dict) -> None:
    models = [("cold_start", REPO / setup["policy"], 0)]
    models += [(f"{arm}/seed{seed}", run_dir(args, arm, seed), seed) for arm in args.arms for seed in args.seeds]
    for name, model, seed in models:
        target = args.out / name / "eval.json" if name != "cold_start" else args.out / "cold_start_eval.json"
        if target.is_file():
            continue
        print(f"[{time.strftime('%H:%M:%S')}] eval  {name}", flush=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(evaluate(args, setup, model, seed), indent=1))


def curve(folder: Path) -> list[dict]:
    """(step, proxy, gold) of each log of a run."""
    points = []
    for line in (folder / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        if "gold/math_accuracy" in record:
            points.append(
                {"step": record["step"], "proxy": record["proxy/reward"], "gold": record["gold/math_accuracy"]}
            )
    return points


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _spread(values: list[float]) -> str:
    if len(values) < 2:
        return f"{values[0]:.3f}"
    return f"{statistics.mean(values):.3f} ± {statistics.stdev(values):.3f}"


def summarise(args) -> dict:
    """Per arm and seed: the first and last logs' proxy and gold, where the curves part, when the monitor fired,
    the held-out pass@1 of the final model, and examples of what it writes."""
    cold = json.loads((args.out / "cold_start_eval.json").read_text())
    arms = {}
    for arm in args.arms:
        seeds = {}
        for seed in args.seeds:
            folder = run_dir(args, arm, seed)
            points, card = curve(folder), json.loads((folder / "run_card.json").read_text())
            evaluation = json.loads((folder / "eval.json").read_text())
            head, tail = points[: args.patience], points[-args.patience :]  # first and last logs, averaged
            hacking = card.get("reward_hacking")
            seeds[seed] = {
                "proxy_start": _mean([p["proxy"] for p in head]), "proxy_end": _mean([p["proxy"] for p in tail]),
                "gold_start": _mean([p["gold"] for p in head]), "gold_end": _mean([p["gold"] for p in tail]),
                "final_step": card.get("final_step"),
                "monitor": hacking and {key: hacking.get(key) for key in ("diverged_from", "seen_at", "restored_checkpoint")},
                "heldout_pass@1": evaluation["pass@1"],
                "examples": evaluation["examples"],
                "curve": points,
            }  # fmt: skip
        arms[arm] = seeds
    return {"cold_start_pass@1": cold["pass@1"], "steps": args.steps, "seeds": args.seeds, "arms": arms}


def report(summary: dict) -> str:
    lines = [
        f"Cold start held-out pass@1: {summary['cold_start_pass@1']:.3f}. {summary['steps']} GRPO steps per run, "
        f"seeds {summary['seeds']}; mean ± standard deviation over seeds.",
        "",
        "| arm | proxy: first -> last logs | gold: first -> last logs | held-out pass@1 of the final model | "
        "monitor fired (seeds) | fired at step (divergence began at), by seed |",
        "|---|---|---|---|---|---|",
    ]
    for arm, seeds in summary["arms"].items():
        rows = list(seeds.values())
        fired = [row["monitor"] for row in rows if row["monitor"]]
        began = ", ".join(
            f"{row['monitor']['seen_at']} ({row['monitor']['diverged_from']})" if row["monitor"] else "-"
            for row in rows
        )
        lines.append(
            f"| {arm} | {_spread([r['proxy_start'] for r in rows])} -> {_spread([r['proxy_end'] for r in rows])} | "
            f"{_spread([r['gold_start'] for r in rows])} -> {_spread([r['gold_end'] for r in rows])} | "
            f"{_spread([r['heldout_pass@1'] for r in rows])} | {len(fired)} of {len(rows)} | {began} |"
        )
    lines += ["", "Each seed's held-out pass@1 and what the final model writes (the first held-out problem):", ""]
    for arm, seeds in summary["arms"].items():
        for seed, row in seeds.items():
            example = row["examples"][0]
            text = example["completion"].replace("\n", "\\n")[:100]
            lines.append(
                f"- {arm}, seed {seed}: pass@1 {row['heldout_pass@1']:.3f}, stopped at step {row['final_step']}; "
                f"writes `{text}` (gold {example['answer']}, {'right' if example['correct'] else 'wrong'})"
            )
    return "\n".join(lines)


def plot(summary: dict, target: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = list(summary["arms"])
    columns = min(4, len(arms))
    rows = (len(arms) + columns - 1) // columns
    figure, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.2 * rows), squeeze=False)
    colours = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"]
    for index, arm in enumerate(arms):
        axis = axes[index // columns][index % columns]
        twin = axis.twinx()
        for (seed, row), colour in zip(summary["arms"][arm].items(), colours, strict=False):
            steps = [point["step"] for point in row["curve"]]
            twin.plot(steps, [point["proxy"] for point in row["curve"]], color=colour, alpha=0.35, linestyle="--")
            axis.plot(steps, [point["gold"] for point in row["curve"]], color=colour, label=f"seed {seed}")
            if row["monitor"]:
                axis.axvline(row["monitor"]["seen_at"], color=colour, linestyle=":", alpha=0.8)
        axis.set_title(arm)
        axis.set_ylim(0, 1)
        axis.set_xlim(0, summary["steps"])
        axis.set_xlabel("step")
        axis.set_ylabel("gold (verifier), solid")
        twin.set_ylabel("proxy (training reward), dashed")
        if index == 0:
            axis.legend(loc="lower left", fontsize=7)
    for index in range(len(arms), rows * columns):
        axes[index // columns][index % columns].axis("off")
    figure.suptitle("Training reward (dashed) vs verifier (solid) on the same completions; dotted: monitor fired")
    figure.tight_layout()
    target.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(target, dpi=110)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    setup = MODELS[args.model]
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    if not args.report_only:
        orms = train_orms(args, setup)
        train_arms(args, setup, orms)
        evaluate_all(args, setup)
    summary = summarise(args)
    summary["minutes"] = (time.time() - started) / 60
    (args.out / "results.json").write_text(json.dumps(summary, indent=1))
    text = report(summary)
    (args.out / "report.md").write_text(text + "\n")
    plot(summary, args.out / "reward_hacking.png")
    if args.plot:
        args.plot.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(args.out / "reward_hacking.png", args.plot)
    print(text)
    return summary


if __name__ == "__main__":
    main()
