"""Benchmark: what RL buys on the real model. DAPO against its cheaper alternatives and two controls, from the one
SmolLM2 cold start, at DAPO's sample budget, over seeds.

    python scripts/bench/real_model_arms.py                       # the arms x seeds 0 1 2, two jobs at a time
    python scripts/bench/real_model_arms.py --arms rft sft_more --seeds 0 1 2 --dry-run
    python scripts/bench/real_model_arms.py --fast --model DIR    # plumbing only (the test suite runs it on a stand-in)
    python scripts/bench/real_model_arms.py --arms rft sft_more --report-only   # the report of what has finished

The cold start and the DAPO runs are `scripts/demo_real.py --seeds ...`'s (run first when missing, reused when
there; --demo-dir). Each other arm trains from that cold start once per seed with the repo's own recipe and
configs (recipes/configs/smollm2-135m/), and is evaluated with the demo's protocol (eval.yaml) on the same
held-out problems:

    rft             rejection-sampling SFT (RFT / ReST-EM, recipes/rejection_sampling.py, one round): the cold start
                    samples as many completions as that seed's DAPO run sampled (n per problem on DAPO's training
                    problems), keeps the verified ones, and is fine-tuned on them
    sft_more        SFT continued on the task's worked solutions (recipes/sft.py, sft.yaml) for as many trained
                    tokens as that seed's DAPO run put through its loss
    random_reward   DAPO with math_accuracy replaced by a seeded coin flip (the `random` reward, p = 0.5)
    format_only     DAPO with math_accuracy replaced by `format_only` (1 for a readable boxed answer, right or wrong)
    dapo_after_sft  DAPO as the demo runs it, from sft_more's model of the same seed instead of the cold start: what RL
                    adds once SFT has had as many tokens (the report gives it minus sft_more, paired by seed)
    dapo_stale      DAPO as the demo runs it, generating one step ahead in a rollout worker on the second core
                    (max_staleness 1, token_truncate correction): what one step of staleness costs this model
                    (the report's "DAPO minus each arm" row); it takes both cores

The controls keep DAPO's steps, and dynamic sampling filters on their summed reward (there is no accuracy reward
to filter on; filtering on it would leak the verifier). Every GRPO arm runs in the precision its DAPO run resolved
(run_card.json: sampling_dtype, bf16), so that they differ from it only by what they are named for; RFT and
continued SFT run in their configs' fp32, as the cold start's SFT did.

Written as results come in (a rerun skips what is done; a GRPO run cut off resumes from its last checkpoint):
    <output-dir>/<arm>/seed<k>/          the training run, <output-dir>/logs/<arm>_s<k>.log
    <output-dir>/eval/<arm>_s<k>/        eval.evaluate's run
    <output-dir>/report.md, results.json each arm's paired gain over the cold start per seed and pooled over seeds,
                                         and DAPO minus each arm, pooled (scripts/bench/real_model_arms_report.py)
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import shlex
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

import demo_real  # noqa: E402
from demo_real import CONFIGS, Job, evaluation, finished, recipe, run_jobs  # noqa: E402

from recipes.common.training.monitor import without_run_summary  # noqa: E402
from scripts.bench.real_model_arms_report import write_report  # noqa: E402
from scripts.bench.sample_efficiency_runs import rewards_flags  # noqa: E402

logger = logging.getLogger("bench.real_model_arms")

# In the order they run: RFT, the cheaper route to the same samples, and the random-reward control answer the first
# question; continued SFT (13 s a step of 8 in fp32 on one core, 40 min a seed) comes last.
ARMS = {
    "rft": "Rejection-sampling SFT (RFT), same sampled completions",
    "random_reward": "DAPO with a random 0/1 reward (control)",
    "format_only": "DAPO with a format-only reward (control)",
    "sft_more": "SFT continued on worked solutions, same trained tokens",
    "dapo_after_sft": "DAPO from the continued-SFT model",
    "dapo_stale": "DAPO one step off-policy (max_staleness 1, rollout worker)",
    # what the configs' bf16 costs (issue: bf16 against fp32 on SmolLM2): DAPO as the demo runs it in another precision;
    # with the configs' `auto` resolved to bf16 on this CPU, each arm minus DAPO is fp32's (or one half's) effect
    "dapo_fp32": "DAPO in fp32 (sampling and loss pass)",
    "dapo_bf16_sampling": "DAPO with bf16 sampling, fp32 loss pass",
    # the collapse (issue: why the gain fell after step 50): DAPO past its 40 steps with KL to the cold start logged,
    # and the same with a remedy (--remedy), each evaluated at every --long-evals step; dapo_long continues the demo's
    # run from its last checkpoint where that is the same run (continued_from_demo), the remedy trains from step 0
    "dapo_long": "DAPO, longer, KL to the cold start logged",
    "remedy_long": "DAPO, longer, with the remedy",
}
LONG = ("dapo_long", "remedy_long")
STARTS = {"dapo_after_sft": "sft_more"}  # arms that train from another arm's model (same seed), not the cold start
# Arms that are the demo's DAPO run (its config, steps and precision) with these flags added: dapo_after_sft differs by
# its starting model (STARTS), dapo_stale by one step of staleness with the correction that did best on the tiny demo
# (docs/benchmarks.md).
AS_DAPO = {
    "dapo_after_sft": [],
    "dapo_stale": ["--max_staleness", "1", "--vllm_importance_sampling_mode", "token_truncate"],
    "dapo_fp32": demo_real.PRECISION["fp32"],  # after the DAPO run's own precision flags: the last one given wins
    "dapo_bf16_sampling": demo_real.PRECISION["bf16-sampling"],
}
CORES = {"dapo_stale": 2}  # the trainer and its rollout worker, a process each; every other training job takes one
DEFAULT_ARMS = [arm for arm in ARMS if arm not in LONG and arm not in AS_DAPO]  # the arms at DAPO's budget
# The remedy's default. Every step of dapo_lora.yaml is one optimizer step on one generation batch, so the policy that
# sampled is the one that trains and the ratio is 1 (clip_ratio 0 in every step of the three 40-step runs):
# clip-higher, Clip-Cov and KL-Cov act through that ratio and cannot act here. A KL term to the cold start can
# (TRL's beta, the k3 estimator; LoRA's reference is the adapter disabled, free in memory).
REMEDY = "--beta 0.04"
# What each arm costs per seed on the 2-core machine (one process, one thread, beside another job), for --dry-run:
# a DAPO run of 40 steps took 19-22 min (docs/demo-real.md), dapo_long its 20 more; an evaluation 4 min; SFT 13-15 s a
# step of 8 rows.
# dapo_stale: core-minutes (two cores for about 12 min; the bench's asynchronous step took 0.36x the synchronous one).
MINUTES = {"rft": 34, "sft_more": 40, "random_reward": 20, "format_only": 20, "dapo_long": 13, "remedy_long": 33,
           "dapo_after_sft": 30, "dapo_stale": 24, "dapo_fp32": 27, "dapo_bf16_sampling": 23,
           "eval": 4}  # fmt: skip
FAST = {
    "rft": ["--sampling", json.dumps({"n": 2, "max_new_tokens": 8, "batch_size": 8})],
    "sft": [],
    "grpo": demo_real.FAST["dapo"],
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--demo-dir", type=Path, default=REPO / "artifacts" / "demo-real",
                        help="scripts/demo_real.py's output: the cold start (sft), the DAPO runs and their evaluations")  # fmt: skip
    parser.add_argument("--output-dir", type=Path, default=REPO / "artifacts" / "bench" / "real_model_arms")
    parser.add_argument("--arms", nargs="+", choices=list(ARMS), default=DEFAULT_ARMS,
                        help=f"default: {' '.join(DEFAULT_ARMS)} (the arms at DAPO's budget; the others on request)")  # fmt: skip
    parser.add_argument("--long-evals", type=int, nargs="+", default=[40, 60],
                        help="the longer arms train to the last of these steps and are evaluated at each")  # fmt: skip
    parser.add_argument("--remedy", default=REMEDY, help=f"recipes/grpo.py flags of remedy_long (default {REMEDY!r})")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--cores", type=int, default=2, help="jobs run side by side, one core each")
    parser.add_argument("--model", type=Path, help="start from this model folder instead of SmolLM2 (demo_real's)")
    parser.add_argument("--fast", action="store_true", help="tiny budgets: checks the plumbing, not learning")
    parser.add_argument("--in-process", action="store_true", help="every job in this process, one after another "
                        "(demo_real.py's --in-process: how the test suite runs --fast)")  # fmt: skip
    parser.add_argument("--dry-run", action="store_true", help="print the jobs and the time they should take")
    parser.add_argument("--report-only", action="store_true",
                        help="write report.md from the evaluations that have finished; start nothing (safe beside "
                             "a run in progress)")  # fmt: skip
    args = parser.parse_args(argv)
    # an arm's starting arm is reused when it has finished, trained first when not (a new list: not the default's)
    args.arms = args.arms + [start for arm, start in STARTS.items() if arm in args.arms and start not in args.arms]
    if args.long_evals != sorted(set(args.long_evals)) or args.long_evals[0] < 1:
        parser.error(f"--long-evals takes steps in increasing order, e.g. 40 60: got {args.long_evals}")
    if len(set(args.seeds)) != len(args.seeds):
        parser.error(f"--seeds lists a seed twice: {args.seeds}")
    return args


def demo_argv(args: argparse.Namespace) -> list[str]:
    argv = ["--output-dir", str(args.demo_dir), "--seeds", *map(str, args.seeds), "--cores", str(args.cores)]
    argv += ["--fast"] if args.fast else []
    return argv + (["--in-process"] if args.in_process else []) + (["--model", str(args.model)] if args.model else [])


def dapo_budget(run_dir: Path) -> dict:
    """What a DAPO run spent and how it ran: completions sampled (dynamic sampling's extra rounds included), tokens
    through the loss, steps, its training data, and the precision it resolved (flags for the other arms)."""
    card = json.loads((run_dir / "run_card.json").read_text())
    training, data = card["config"]["training"], card["config"]["script"]
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = {record["step"]: record for record in records if "loss" in record}  # a resumed step: the later log
    plain = training["per_device_train_batch_size"] * card.get("processes", 1) / training["num_iterations"]
    per_group = training["num_generations"]
    sampled = sum(
        plain if "dynamic_sampling/groups_generated" not in r else r["dynamic_sampling/groups_generated"] * per_group
        for r in steps.values()
    )
    return {
        "completions": round(sampled),
        "tokens_trained": round(sum(r.get("tokens/trained", 0) for r in steps.values())),
        "steps": card["final_step"],
        "dataset_name": data["dataset_name"],
        "dataset_seed": data["dataset_seed"],
        "precision": [
            "--sampling_dtype",
            card["sampling_dtype"],
            "--loss_dtype",
            "bfloat16" if training.get("bf16") else "float32",
        ],  # fmt: skip
    }


def rows_per_unit(budget: dict) -> int:
    """Rows that dataset_num_rows 1 gives (the levels of a synthetic task: its count is per level)."""
    from tasks.data_arguments import DataArguments
    from tasks.schema import load_rows

    return len(load_rows(DataArguments(dataset_name=budget["dataset_name"], dataset_num_rows=1,
                                       dataset_seed=budget["dataset_seed"])))  # fmt: skip


def solution_tokens(budget: dict, tokenizer_dir: Path, rows: int) -> float:
    """Mean tokens of a worked solution and its end-of-turn token (what SFT's completion-only loss trains on)."""
    from transformers import AutoTokenizer

    from tasks.data_arguments import DataArguments
    from tasks.schema import load_rows

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    data = DataArguments(
        dataset_name=budget["dataset_name"], dataset_num_rows=rows, dataset_seed=budget["dataset_seed"]
    )
    solutions = load_rows(data)["solution"]
    return sum(len(tokenizer(text, add_special_tokens=False).input_ids) + 1 for text in solutions) / len(solutions)


def arm_argv(
    arm: str, seed: int, budget: dict, cold_start: Path, fast: bool, long_evals=(40, 60), remedy: str = REMEDY
) -> tuple[str, Path, list[str]]:
    """(recipe script, config, flags) of one arm for one seed."""
    data = ["--dataset_name", budget["dataset_name"], "--dataset_seed", str(budget["dataset_seed"])]
    data += ["--seed", str(seed)]
    unit = rows_per_unit(budget)
    if arm == "rft":
        config = CONFIGS / "rejection_sampling.yaml"
        import yaml

        n = 2 if fast else yaml.safe_load(config.read_text())["sampling"]["n"]
        per_unit = math.ceil(budget["completions"] / n / unit)
        flags = ["--num_rounds", "1", "--eval_samples_per_problem", "0", "--dataset_num_rows", str(per_unit)]
        return "rejection_sampling.py", config, [*data, *flags, *(FAST["rft"] if fast else [])]
    if arm == "sft_more":
        config = CONFIGS / "sft.yaml"
        import yaml

        batch = yaml.safe_load(config.read_text())["per_device_train_batch_size"]
        rows = max(1, math.ceil(budget["tokens_trained"] / solution_tokens(budget, cold_start, 64)))
        per_unit, steps = math.ceil(rows / unit), max(1, math.ceil(rows / batch))
        flags = ["--dataset_num_rows", str(per_unit), "--max_steps", str(steps)]
        return "sft.py", config, [*data, *flags, *(FAST["sft"] if fast else [])]
    config = CONFIGS / "dapo_lora.yaml"
    import yaml

    if arm in LONG:
        steps = long_evals[-1]
        # after the --fast flags: a flag given twice takes its last value, so these steps and checkpoints stand
        flags = ["--max_steps", str(steps), "--log_reference_kl", "true", "--save_strategy", "steps", "--save_steps",
                 str(math.gcd(*long_evals)), "--save_total_limit", str(steps), *budget["precision"]]  # fmt: skip
        flags += shlex.split(remedy) if arm == "remedy_long" else []
        return "grpo.py", config, [*data, *(FAST["grpo"] if fast else []), *flags]
    if arm in AS_DAPO:
        return "grpo.py", config, [*data, "--max_steps", str(budget["steps"]), *budget["precision"], *AS_DAPO[arm],
                                   *(FAST["grpo"] if fast else [])]  # fmt: skip
    dapo = yaml.safe_load(config.read_text())
    reward = {"name": "random", "weight": 1.0, "p": 0.5, "seed": seed} if arm == "random_reward" else {
        "name": "format_only", "weight": 1.0}  # fmt: skip
    flags = [*rewards_flags(dapo, replace_accuracy=reward), "--variance_rewards", "sum", "--max_steps",
             str(budget["steps"]), *budget["precision"]]  # fmt: skip
    return "grpo.py", config, [*data, *flags, *(FAST["grpo"] if fast else [])]


def final_model(arm: str, run_dir: Path, step: int | None = None) -> Path:
    if arm == "rft":  # the rounds' summary names the model the last round trained
        return Path(json.loads((run_dir / "summary.json").read_text())["final_model"])
    card = json.loads((run_dir / "run_card.json").read_text())
    if step is None or step == card["final_step"]:
        return run_dir
    return run_dir / f"checkpoint-{step}"  # a LoRA checkpoint: the adapter, which eval loads on its base


def evaluated(args: argparse.Namespace) -> list[tuple[str, str, int | None]]:
    """(report name, arm, step) of every evaluation: an arm's last step, a longer arm's each of --long-evals."""
    return [
        (f"{arm}@{step}" if arm in LONG else arm, arm, step if arm in LONG else None)
        for arm in sorted(args.arms, key=list(ARMS).index)
        for step in (args.long_evals if arm in LONG else [None])
    ]


def labels(args: argparse.Namespace) -> dict[str, str]:
    names = {}
    for name, arm, step in evaluated(args):
        remedy = f" ({args.remedy})" if arm == "remedy_long" else ""
        names[name] = ARMS[arm] + remedy + (f", at step {step}" if step is not None else "")
    return names


def continued_from_demo(arm: str, seed: int, args: argparse.Namespace, run_dir: Path) -> None:
    """dapo_long's first steps are that seed's demo-real DAPO run, so it starts from that run's last checkpoint
    (optimizer, scheduler, RNG and the trainer's own state) and its metrics instead of training them again: a third
    of its cost. Only where that is the same run: a learning-rate schedule that does not depend on max_steps (constant,
    with warmup counted in steps) and a checkpoint at the run's final step, short of the longer run's last step."""
    if arm != "dapo_long" or any(run_dir.glob("checkpoint-*")):
        return
    stage = args.demo_dir / next(iter(demo_real.dapo_stages([seed])))
    card = json.loads((stage / "run_card.json").read_text())
    training, step = card["config"]["training"], card["final_step"]
    checkpoint = stage / f"checkpoint-{step}"
    schedule = training.get("lr_scheduler_type") in ("constant", "constant_with_warmup")
    warmup = float(training.get("warmup_steps") or 0)  # below 1 a share of max_steps (transformers 5)
    in_steps = not training.get("warmup_ratio") and (warmup == 0 or warmup >= 1)
    if not (schedule and in_steps and checkpoint.is_dir() and step < args.long_evals[-1]):
        logger.info("dapo_long seed %d trains from step 0: %s is not a run it can continue", seed, stage)
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    shutil.copytree(checkpoint, run_dir / checkpoint.name)
    records = [json.loads(line) for line in (stage / "metrics.jsonl").read_text().splitlines() if line.strip()]
    steps = [kept for kept in map(without_run_summary, records) if kept]  # its steps' curves, less the run's summary
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(record) + "\n" for record in steps))
    logger.info("dapo_long seed %d continues %s from step %d", seed, checkpoint, step)


def arm_jobs(args: argparse.Namespace, budgets: dict[int, dict], cold_start: Path) -> list[Job]:
    """Each (arm, seed): its training, then its evaluation, arm by arm in ARMS's order, so that whole rows of the table
    come early. A finished training or evaluation is not redone."""
    out, jobs = args.output_dir, []
    for arm in sorted(args.arms, key=list(ARMS).index):
        for seed in args.seeds:
            name, run_dir = f"{arm}_s{seed}", out / arm / f"seed{seed}"
            log = out / "logs" / f"{name}.log"
            start_model, after = cold_start, []
            if arm in STARTS:
                start_model = out / STARTS[arm] / f"seed{seed}"
                after = [] if finished(start_model, "run_card.json", False) else [f"{STARTS[arm]}_s{seed}"]
            if not finished(run_dir, "run_card.json", False):
                script, config, flags = arm_argv(
                    arm, seed, budgets[seed], cold_start, args.fast, args.long_evals, args.remedy
                )
                continued_from_demo(arm, seed, args, run_dir)
                if script == "grpo.py" and any(run_dir.glob("checkpoint-*")):
                    flags += ["--resume_from_checkpoint", "true"]

                def start(script=script, config=config, flags=flags, run_dir=run_dir, log=log, model=start_model):
                    return recipe(script, config, model, run_dir, flags, log, in_process=args.in_process), log

                jobs.append(Job(name, min(CORES.get(arm, 1), args.cores), after, start))
            for report_name, _, step in [entry for entry in evaluated(args) if entry[1] == arm]:
                folder = out / "eval" / f"{report_name}_s{seed}"
                if finished(folder, "done", False):
                    continue
                after = [] if finished(run_dir, "run_card.json", False) else [name]
                eval_log = out / "logs" / f"eval_{report_name}_s{seed}.log"

                def evaluate(arm=arm, run_dir=run_dir, folder=folder, eval_log=eval_log, step=step):
                    model = final_model(arm, run_dir, step)
                    return evaluation(model, folder, args.fast, eval_log, args.in_process), eval_log

                done = lambda folder=folder: (folder / "done").touch()  # noqa: E731
                jobs.append(Job(f"eval_{report_name}_s{seed}", 1, after, evaluate, done))
    return jobs


def main(argv: list[str] | None = None) -> dict:
    logging.basicConfig(
        format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S", level=logging.INFO
    )
    args = parse_args(argv)
    stages = demo_real.dapo_stages(args.seeds)  # stage -> seed
    if args.dry_run:  # what is still to do: a finished training or evaluation is skipped by the run too
        todo = [(arm, seed) for arm in args.arms for seed in args.seeds
                if not finished(args.output_dir / arm / f"seed{seed}", "run_card.json", False)]  # fmt: skip
        evaluations = sum(not finished(args.output_dir / "eval" / f"{name}_s{seed}", "done", False)
                          for name, _, _ in evaluated(args) for seed in args.seeds)  # fmt: skip
        runs = len(todo)
        minutes = (sum(MINUTES[arm] for arm, _ in todo) + evaluations * MINUTES["eval"]) / args.cores
        print(f"{runs} runs and {evaluations} evaluations to do, about {minutes:.0f} min on {args.cores} cores past demo-real's "
              f"cold start and DAPO runs ({args.demo_dir})")  # fmt: skip
        return {}
    if args.report_only:
        missing = [stage for stage in stages if not (args.demo_dir / stage / "run_card.json").is_file()]
        if missing:
            raise SystemExit(f"--report-only: no DAPO run {', '.join(missing)} in {args.demo_dir} to size the arms "
                             "on; run without --report-only first")  # fmt: skip
    else:
        demo_real.main(demo_argv(args))  # the cold start, DAPO per seed and their evaluations; skips what is done
    budgets = {seed: dapo_budget(args.demo_dir / stage) for stage, seed in stages.items()}
    if not args.report_only:
        (args.output_dir / "logs").mkdir(parents=True, exist_ok=True)
        timings = run_jobs(arm_jobs(args, budgets, args.demo_dir / "sft"), args.cores, set())
        saved = args.output_dir / "timings.json"  # minutes per job, kept across reruns that skip finished ones
        saved.write_text(json.dumps({**(json.loads(saved.read_text()) if saved.is_file() else {}), **timings},
                                    indent=1))  # fmt: skip
    evaluations = {"sft": args.demo_dir / "eval" / "sft"}
    evaluations |= {f"dapo_s{seed}": args.demo_dir / "eval" / stage for stage, seed in stages.items()}
    for name, _, _ in evaluated(args):
        evaluations |= {f"{name}_s{seed}": args.output_dir / "eval" / f"{name}_s{seed}" for seed in args.seeds}
    runs = {f"dapo_s{seed}": args.demo_dir / stage for stage, seed in stages.items()}
    runs |= {f"{arm}_s{seed}": args.output_dir / arm / f"seed{seed}" for arm in args.arms for seed in args.seeds}
    return write_report(args, labels(args), budgets, evaluations, STARTS, precision_runs(runs))


def precision_runs(runs: dict[str, Path]) -> dict[str, dict]:
    """Of each finished GRPO run ("<arm>_s<seed>" -> its folder): the precision its run card resolved, the machine
    it ran on and its seconds a step, for the report's precision table."""
    found = {}
    for name, folder in runs.items():
        card_file = folder / "run_card.json"
        if not card_file.is_file():
            continue
        card = json.loads(card_file.read_text())
        if card.get("recipe") != "grpo":
            continue
        found[name] = {
            "sampling_dtype": card.get("sampling_dtype"),
            "loss_dtype": "bfloat16" if card["config"]["training"].get("bf16") else "float32",
            "machine": card.get("machine"),  # absent from cards written before the card named it
            "seconds_per_step": card.get("timing", {}).get("seconds_per_step", {}).get("step"),
        }
    return found


if __name__ == "__main__":
    main()
