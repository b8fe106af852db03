"""Benchmark: what tool use buys SmolLM2-135M on problems it cannot compute in its head (issue 54; the read-out fixed
before the first run is docs/readouts/what-tools-buy.md, and this bench runs exactly its arms).

    python scripts/bench/tool_arms.py --seeds 0 1 2              # everything, two jobs at a time, resumable
    python scripts/bench/tool_arms.py --seeds 0 1 2 --dry-run    # what is still to do, its minutes and its longest chain
    python scripts/bench/tool_arms.py --fast --model DIR         # plumbing only (the test suite runs it on a stand-in)
    python scripts/bench/tool_arms.py --report-only              # the report of what has finished; starts nothing

On `arithmetic-hard:1-4` (tasks/arithmetic_hard.py), from SmolLM2-135M-Instruct, in fp32, each stage the repo's own
recipe with the configs of recipes/configs/smollm2-135m/:

    text_cold       SFT on the split's text-only worked solutions (sft.yaml)                        once
    tool_cold       SFT on its tool-using worked solutions (sft_tools.yaml, one_call), with the text
                    cold start's rows and steps                                                        once
    text_dapo       DAPO without tools from text_cold (dapo.yaml)                                      per seed
    tool_dapo       DAPO with the python tool from tool_cold (dapo_tools.yaml, at most 3 calls)        per seed
    tool_sft_more   SFT continued from tool_cold on tool-using worked solutions of DAPO's training problems, for
                    as many trained tokens as that seed's tool_dapo (its metrics' tokens/trained)      per seed
    tool_rft        one round of rejection sampling with the tool from tool_cold, on as many sampled completions as
                    that seed's tool_dapo sampled (dynamic sampling's extra rounds included), then SFT on what
                    verified (rejection_sampling.yaml)                                                  per seed

Every model is evaluated with one protocol (eval.yaml's, on 64 held-out problems per level of levels 1-4, n 4,
T 0.7, 256 new tokens): the tool arms and tool_cold with `--tools python --max-tool-calls 3` and the DAPO config's
tool options, the text arms and text_cold without; and twice more, once per cold start: tool_cold_withheld (the tool
cold start without the tool) and text_cold_given (the text cold start given it).

Resumable: a finished training (its run_card.json) or evaluation (its `done`) is skipped on a rerun, a DAPO run cut
off resumes from its last checkpoint, and the report is rewritten after every finished evaluation:
    <output-dir>/<arm>/seed<k>/, <output-dir>/text_cold/, tool_cold/   the training runs
    <output-dir>/eval/<name>/                                           eval.evaluate's runs
    <output-dir>/logs/<job>.log, timings.json (minutes per job)
    <output-dir>/report.md, results.json                                scripts/bench/tool_arms_report.py
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

import demo_real  # noqa: E402
from demo_real import CONFIGS, Job, finished, recipe, run_jobs  # noqa: E402

from scripts.bench.real_model_arms import dapo_budget, rows_per_unit  # noqa: E402
from scripts.bench.tool_arms_report import write_report  # noqa: E402

logger = logging.getLogger("bench.tool_arms")

DATASET = "arithmetic-hard:1-4"
DAPO_STEPS = 40  # the read-out's "40 steps" (dapo_lora.yaml's; dapo.yaml and dapo_tools.yaml say 10)
MAX_TOOL_CALLS = 3
# sft_tools.yaml's max_length (512) is sized for the easy task's rows (440-480 tokens); a tool-using row of the hard
# split is 474-558 tokens with SmolLM2's tokenizer (the tools' system block and question 350-393, the call, result and
# answer 124-169: every level-3 and level-4 row is over 512, measured on 200 rows), so the tool SFT runs take 640, which
# cuts none of them (truncation would cut the answer off)
TOOL_MAX_LENGTH = 640
COLD = {"text_cold": ("sft.yaml", False), "tool_cold": ("sft_tools.yaml", True)}  # name -> (config, tools)
ARMS = {  # per seed: (label, the cold start it trains from, tools)
    "text_dapo": ("DAPO without tools, from the text cold start", "text_cold", False),
    "tool_dapo": ("DAPO with the python tool, from the tool cold start", "tool_cold", True),
    "tool_sft_more": ("SFT continued on tool traces, tool_dapo's trained tokens", "tool_cold", True),
    "tool_rft": ("RFT with the tool, tool_dapo's sampled completions", "tool_cold", True),
}
# the evaluations once per cold start: name -> (model, tools)
ONCE = {
    "text_cold": ("text_cold", False),
    "tool_cold": ("tool_cold", True),
    "tool_cold_withheld": ("tool_cold", False),
    "text_cold_given": ("text_cold", True),
}
PROTOCOL = {"dataset": DATASET, "num-rows": 64, "n": 4, "temperature": 0.7, "top-p": 1.0, "max-new-tokens": 256,
            "seeds": [0]}  # fmt: skip
# Minutes a job takes on a 2-core machine, one process and one thread each beside another job (--dry-run): measured
# in the first sessions of `--seeds 0 1 2` (timings.json; the machine often loaded further by tests): text_cold 27,
# tool_cold 79, text_dapo 35-45, tool_dapo 4-5 min a step of 40 (the tool system block makes its prompts 350-390
# tokens, and dynamic sampling's extra round runs in most steps), an evaluation 9-15 without tools and 48 with them
# (before shared prefixes). tool_rft samples as many completions as tool_dapo (about 2,560, with the tool) and
# tool_sft_more trains on about as many tokens as tool_cold: estimates from those.
MINUTES = {"text_cold": 27, "tool_cold": 79, "text_dapo": 40, "tool_dapo": 190, "tool_sft_more": 80, "tool_rft": 100,
           "eval": 12, "eval_tools": 45}  # fmt: skip
FAST = {
    "sft": ["--max_steps", "1", "--dataset_num_rows", "2", "--per_device_train_batch_size", "2"],
    "grpo": demo_real.FAST["dapo"],
    "rft": {"n": 2, "max_new_tokens": 8, "batch_size": 8},
    "eval": demo_real.FAST["eval"],
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output-dir", type=Path, default=REPO / "artifacts" / "bench" / "tool_arms")
    parser.add_argument("--model-dir", type=Path, default=REPO / "artifacts" / "models" / "smollm2-135m-instruct")
    parser.add_argument("--model", type=Path, help="start from this model folder instead of SmolLM2-135M-Instruct")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--cores", type=int, default=2, help="jobs run side by side, one core each")
    parser.add_argument("--dapo-steps", type=int, default=DAPO_STEPS, help=f"DAPO's steps (default {DAPO_STEPS})")
    parser.add_argument("--fast", action="store_true", help="tiny budgets: checks the plumbing, not learning")
    parser.add_argument("--in-process", action="store_true",
                        help="every job in this process, one after another (how the test suite runs --fast)")  # fmt: skip
    parser.add_argument("--dry-run", action="store_true", help="print the jobs still to do and their minutes")
    parser.add_argument("--report-only", action="store_true",
                        help="write report.md from what has finished; start nothing (safe beside a run)")  # fmt: skip
    args = parser.parse_args(argv)
    if len(set(args.seeds)) != len(args.seeds):
        parser.error(f"--seeds lists a seed twice: {args.seeds}")
    if args.in_process and args.cores != 1:
        args.cores = 1  # one job at a time in this process
    return args


def run_dir(args: argparse.Namespace, name: str) -> Path:
    """A training run's folder: "text_cold", "tool_cold" or "<arm>_s<k>"."""
    if name in COLD:
        return args.output_dir / name
    arm, seed = name.rsplit("_s", 1)
    return args.output_dir / arm / f"seed{seed}"


def config_of(name: str) -> dict:
    return yaml.safe_load((CONFIGS / name).read_text())


def tool_options() -> dict:
    """The python tool's options of dapo_tools.yaml, which evaluation and RFT use too."""
    return config_of("dapo_tools.yaml")["tool_options"]


def cold_argv(name: str, fast: bool) -> tuple[str, Path, list[str]]:
    """The cold starts: each its config on the hard split, both with sft.yaml's rows, seed and steps."""
    text = config_of("sft.yaml")
    flags = ["--dataset_name", DATASET, "--dataset_num_rows", str(text["dataset_num_rows"]), "--dataset_seed",
             str(text["dataset_seed"]), "--max_steps", str(text["max_steps"])]  # fmt: skip
    flags += ["--max_length", str(TOOL_MAX_LENGTH)] if COLD[name][1] else []
    return "sft.py", CONFIGS / COLD[name][0], [*flags, *(FAST["sft"] if fast else [])]


def tool_budget(dapo_dir: Path) -> dict:
    """real_model_arms.dapo_budget of a tool_dapo run, with what its sampler ran with (for RFT's sampling)."""
    budget = dapo_budget(dapo_dir)
    training = json.loads((dapo_dir / "run_card.json").read_text())["config"]["training"]
    budget |= {"max_completion_length": training["max_completion_length"], "temperature": training["temperature"]}
    return budget


def sft_row_tokens(budget: dict, tokenizer_dir: Path, rows: int) -> float:
    """Mean tokens of one tool-using SFT row of DAPO's training problems, counted as DAPO's tokens/trained counts
    its own (recipes/stages/grpo/trainer.py: the prompt's and the model's tokens through the loss pass, a tool's
    result not): the rendered conversation (tools' system block, question, call, answer) less the tool's turn."""
    from transformers import AutoTokenizer

    from recipes.stages.sft.tools import tool_schemas, tool_solution_conversations
    from tasks.data_arguments import DataArguments
    from tasks.schema import load_rows

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    schemas = tool_schemas(["python"])
    data = DataArguments(dataset_name=budget["dataset_name"], dataset_num_rows=rows,
                         dataset_seed=budget["dataset_seed"])  # fmt: skip

    def length(messages: list[dict]) -> int:
        return len(tokenizer.apply_chat_template(messages, tools=schemas, tokenize=True, return_dict=True)["input_ids"])

    counts = []
    for conversation in tool_solution_conversations(load_rows(data), "one_call")["messages"]:
        tool_turns = 0
        for index, message in enumerate(conversation):
            if message["role"] == "tool":  # its turn: the render with it less the render without it
                tool_turns += length(conversation[: index + 1]) - length(conversation[:index])
        counts.append(length(conversation) - tool_turns)
    return sum(counts) / len(counts)


def arm_argv(arm: str, seed: int, budget: dict | None, cold: Path, fast: bool, dapo_steps: int = DAPO_STEPS):
    """(recipe script, config, flags) of one arm for one seed; the SFT and RFT arms need their seed's tool_dapo
    `budget` (tool_budget)."""
    if arm in ("text_dapo", "tool_dapo"):
        config = CONFIGS / ("dapo.yaml" if arm == "text_dapo" else "dapo_tools.yaml")
        flags = ["--dataset_name", DATASET, "--seed", str(seed), "--max_steps", str(dapo_steps)]
        return "grpo.py", config, [*flags, *(FAST["grpo"] if fast else [])]
    # DAPO's training problems: other problems than the cold start's
    data = ["--dataset_name", budget["dataset_name"], "--dataset_seed", str(budget["dataset_seed"])]
    data += ["--seed", str(seed)]
    unit = rows_per_unit(budget)
    if arm == "tool_sft_more":
        config = CONFIGS / "sft_tools.yaml"
        per_row = sft_row_tokens(budget, cold, 2 if fast else 16)
        rows = max(1, math.ceil(budget["tokens_trained"] / per_row))
        batch = config_of("sft_tools.yaml")["per_device_train_batch_size"]
        flags = ["--dataset_num_rows", str(math.ceil(rows / unit)), "--max_steps", str(max(1, math.ceil(rows / batch)))]
        flags += ["--max_length", str(TOOL_MAX_LENGTH)]
        return "sft.py", config, [*data, *flags, *(FAST["sft"][:2] if fast else [])]
    if arm == "tool_rft":
        config = CONFIGS / "rejection_sampling.yaml"
        sampling = {**config_of("rejection_sampling.yaml")["sampling"], "max_new_tokens": budget["max_completion_length"],
                    "temperature": budget["temperature"], **(FAST["rft"] if fast else {})}  # fmt: skip
        per_unit = math.ceil(budget["completions"] / sampling["n"] / unit)
        flags = ["--num_rounds", "1", "--eval_samples_per_problem", "0", "--dataset_num_rows", str(per_unit),
                 "--sampling", json.dumps(sampling), "--tools", "python", "--tool_options", json.dumps(tool_options()),
                 "--max_tool_calling_iterations", str(MAX_TOOL_CALLS), "--assistant_only_loss", "true",
                 # a kept trace: the tools' system block and the question (up to 393 tokens), then up to
                 # max_new_tokens of the model's with the tool's results
                 "--max_length", str(TOOL_MAX_LENGTH + sampling["max_new_tokens"])]  # fmt: skip
        return "rejection_sampling.py", config, [*data, *flags]
    raise ValueError(f"unknown arm {arm!r}")


def final_model(name: str, folder: Path) -> Path:
    if name.startswith("tool_rft"):  # the rounds' summary names the model the last round trained
        return Path(json.loads((folder / "summary.json").read_text())["final_model"])
    return folder


def evaluation(model: Path, output: Path, tools: bool, fast: bool, log: Path, in_process: bool):
    """eval.evaluate with eval.yaml's protocol on the hard split (PROTOCOL), with the python tool when `tools`."""
    protocol = {**config_of("eval.yaml"), **PROTOCOL, **(FAST["eval"] if fast else {})}
    command = [sys.executable, "-m", "eval.evaluate", "--model", str(model), "--output-dir", str(output)]
    for key, value in protocol.items():
        command += [f"--{key}", *map(str, value if isinstance(value, list) else [value])]
    if tools:
        command += ["--tools", "python", "--max-tool-calls", str(MAX_TOOL_CALLS), "--tool-options",
                    json.dumps(tool_options())]  # fmt: skip
    logger.info("evaluating %s%s -> %s", model, " with the python tool" if tools else "", output)
    if in_process:
        return demo_real.Ran(command, log)
    return subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT, env=demo_real.environment(),
                            cwd=REPO)  # fmt: skip


def evaluations(args: argparse.Namespace) -> dict[str, tuple[str, bool]]:
    """Every evaluation: name -> (the training run it evaluates, tools), in the order they are reported."""
    found = dict(ONCE)
    for arm, (_, _, tools) in ARMS.items():
        found |= {f"{arm}_s{seed}": (f"{arm}_s{seed}", tools) for seed in args.seeds}
    return found


def trainings(args: argparse.Namespace) -> dict[str, list[str]]:
    """Every training run: name -> the runs it waits for, in the order they should start (the cold starts, each
    seed's DAPO runs, then the arms sized on tool_dapo)."""
    runs = {name: [] for name in COLD}
    for seed in args.seeds:
        runs |= {f"tool_dapo_s{seed}": ["tool_cold"], f"text_dapo_s{seed}": ["text_cold"]}
    for seed in args.seeds:
        runs |= {f"{arm}_s{seed}": ["tool_cold", f"tool_dapo_s{seed}"] for arm in ("tool_rft", "tool_sft_more")}
    return runs


def jobs(args: argparse.Namespace, base: Path) -> list[Job]:
    """The jobs still to do: the evaluations of runs already trained (a rerun after a cut-off session: each takes
    minutes, so its figures are in the report before the long runs go on), then the trainings (so that the long
    chains start early), then the other evaluations, each started as soon as its run is trained and a core is free.
    A job's flags are built when it starts, so that the arms sized on tool_dapo read its finished run."""
    out, todo = args.output_dir, []
    done = {name for name in trainings(args) if finished(run_dir(args, name), "run_card.json", False)}
    for name, after in trainings(args).items():
        if name in done:
            continue
        folder, log = run_dir(args, name), out / "logs" / f"{name}.log"
        arm, _, seed = name.rpartition("_s") if name not in COLD else (name, "", "")
        start_model = base if name in COLD else run_dir(args, ARMS[arm][1])

        def start(name=name, arm=arm, seed=seed, folder=folder, log=log, start_model=start_model):
            if name in COLD:
                script, config, flags = cold_argv(name, args.fast)
            else:
                dapo = run_dir(args, f"tool_dapo_s{seed}")
                budget = tool_budget(dapo) if arm in ("tool_sft_more", "tool_rft") else None
                script, config, flags = arm_argv(arm, int(seed), budget, start_model, args.fast, args.dapo_steps)
                if budget is not None:
                    folder.mkdir(parents=True, exist_ok=True)
                    (folder / "budget.json").write_text(json.dumps({"from": str(dapo), **budget}, indent=1))
            if script == "grpo.py" and any(folder.glob("checkpoint-*")):
                flags = [*flags, "--resume_from_checkpoint", "true"]  # a run cut off: from its last checkpoint
            return recipe(script, config, start_model, folder, flags, log, in_process=args.in_process), log

        todo.append(Job(name, 1, [run for run in after if run not in done], *timed(args, name, start)))
    for name, (trained, tools) in evaluations(args).items():
        folder = out / "eval" / name
        if finished(folder, "done", False):
            continue
        log = out / "logs" / f"eval_{name}.log"

        def evaluate(name=name, trained=trained, tools=tools, folder=folder, log=log):
            model = final_model(trained, run_dir(args, trained))
            return evaluation(model, folder, tools, args.fast, log, args.in_process), log

        def mark(folder=folder):
            (folder / "done").touch()
            report(args, quiet=True)  # partial results as they come

        todo.append(
            Job(f"eval_{name}", 1, [] if trained in done else [trained], *timed(args, f"eval_{name}", evaluate, mark))
        )
    ready = [job for job in todo if job.name.startswith("eval_") and not job.after]
    return ready + [job for job in todo if job not in ready]


def timed(args: argparse.Namespace, name: str, start, done=None):
    """A job's start and done with its minutes kept in <output-dir>/timings.json as soon as it ends (a rerun that
    skips it keeps them)."""
    began = {}

    def timed_start():
        began["at"] = time.time()
        return start()

    def timed_done():
        saved = args.output_dir / "timings.json"
        timings = json.loads(saved.read_text()) if saved.is_file() else {}
        saved.write_text(json.dumps({**timings, name: (time.time() - began["at"]) / 60}, indent=1))
        if done is not None:
            done()

    return timed_start, timed_done


def estimate(args: argparse.Namespace) -> tuple[list[tuple[str, float]], dict]:
    """(job, minutes) of what is still to do, and demo_real.plan_minutes of it on --cores cores: the wall-clock
    minutes and the longest chain of jobs that wait for one another (more cores do not shorten that)."""
    plan = []
    for job in jobs(args, args.model or args.model_dir):
        if job.name.startswith("eval_"):
            tools = evaluations(args)[job.name.removeprefix("eval_")][1]
            plan.append((job.name, MINUTES["eval_tools" if tools else "eval"], job.after))
        else:
            name = job.name if job.name in COLD else job.name.rpartition("_s")[0]
            plan.append((job.name, MINUTES[name], job.after))
    return [(name, minutes) for name, minutes, _ in plan], demo_real.plan_minutes(plan, args.cores)


def report(args: argparse.Namespace, quiet: bool = False) -> dict:
    folders = {name: args.output_dir / "eval" / name for name in evaluations(args)}
    runs = {name: run_dir(args, name) for name in trainings(args)}
    timings = args.output_dir / "timings.json"
    minutes = json.loads(timings.read_text()) if timings.is_file() else {}
    return write_report(args, {arm: label for arm, (label, _, _) in ARMS.items()}, folders, runs, minutes, quiet)


def main(argv: list[str] | None = None) -> dict:
    logging.basicConfig(
        format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S", level=logging.INFO
    )
    args = parse_args(argv)
    if args.dry_run:
        plan, timing = estimate(args)
        for name, job_minutes in plan:
            print(f"  {name:28s} {job_minutes:4.0f} min")
        minutes, chain = timing["wall"], timing["chain_minutes"]
        print(f"{len(plan)} jobs to do, {sum(m for _, m in plan):.0f} core-minutes: about {minutes:.0f} min "
              f"({minutes / 60:.1f} h) on {args.cores} cores, one job a core; the longest chain of jobs that wait "
              f"for one another, {' -> '.join(timing['chain'])}, is {chain:.0f} min ({chain / 60:.1f} h) "
              f"whatever the cores")  # fmt: skip
        return {"jobs": plan, "minutes": minutes, "chain": timing["chain"], "chain_minutes": chain}
    if not args.report_only:
        if args.model is not None:
            base = args.model
        else:
            from offline_models import get_offline_model

            base = get_offline_model("smollm2-135m-instruct", args.model_dir)
        (args.output_dir / "logs").mkdir(parents=True, exist_ok=True)
        todo = jobs(args, base)
        if todo:
            run_jobs(todo, args.cores, set())  # each job's minutes: timings.json, written as it ends
    return report(args)


if __name__ == "__main__":
    main()
