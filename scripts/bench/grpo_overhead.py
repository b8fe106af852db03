"""Benchmark: seconds per GRPO step of our recipe against a bare TRL GRPOTrainer, side by side in one run.

    python scripts/bench/grpo_overhead.py [--model DIR] [--config recipes/configs/demo/dapo.yaml]
                                          [--repeats 2] [--steps 20] [--warmup 2] [--bare-rewards plain]

Both arms train the cold-start model on the same rows with the same GRPOConfig (the config's, with
dynamic sampling off and a log every step):
* ours: `RLVRGRPOTrainer` + the `RLVRMonitor` callback + the config's rewards from the registry, built
  the way recipes/grpo.py builds them;
* bare: `trl.GRPOTrainer` with plain reward functions of the same meaning: a boxed integer equal to
  the gold answer (math_accuracy), TRL's own soft overlong punishment (overlong).
Each repeat builds a fresh trainer of each arm from the model on disk and trains both at once, in two
threads that take turns step by step (only one computes at a time), so a slow spell of a shared machine
falls on both; who goes first alternates between repeats. Each arm keeps its own random state and
starts from the seed, so with the same weights, data order and reward values the two sample the same
completions and do the same work; the output says whether their logged rewards and completion lengths
agreed at every step. Printed: median seconds per step of each (warm-up steps excluded), their ratio
(target <= 1.05), and the median of the per-step paired ratios.

--model defaults to artifacts/demo/sft, the demo's cold-start model; when it is missing, the SFT
recipe's embedded default builds it first (about 5 minutes on two cores).
"""

from __future__ import annotations

import argparse
import logging
import random
import re
import statistics
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

import numpy as np  # noqa: E402
import torch  # noqa: E402
from transformers import TrainerCallback  # noqa: E402

DEFAULT_MODEL = REPO / "artifacts" / "demo" / "sft"
DEFAULT_CONFIG = REPO / "recipes" / "configs" / "demo" / "dapo.yaml"
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_ASSIGNMENT = re.compile(r"^[a-zA-Z]\s*=\s*")  # "\boxed{x=8}" answers 8, as math_accuracy reads it


class Turnstile:
    """Lets two trainers, each in its own thread, run one optimizer step at a time, taking turns.

    Only the thread holding the turn computes; the other waits on a condition (no CPU). So step i of
    one arm runs right after step i of the other, and a slow spell of a shared machine falls on both.
    """

    def __init__(self, first: str, second: str):
        self.turn, self.other = first, {first: second, second: first}
        self.finished: set[str] = set()
        self.condition = threading.Condition()

    def wait(self, name: str) -> None:
        with self.condition:
            self.condition.wait_for(lambda: self.turn == name)

    def hand_over(self, name: str) -> None:
        with self.condition:
            if self.other[name] not in self.finished:
                self.turn = self.other[name]
            self.condition.notify_all()

    def finish(self, name: str) -> None:
        with self.condition:
            self.finished.add(name)
            self.turn = self.other[name]
            self.condition.notify_all()


class StepClock(TrainerCallback):
    """Times every optimizer step of one arm (generation, rewards, loss, backward, the previous step's
    logging), keeps its logs, and hands the turn to the other arm after each step.

    The two threads share the process's random generators: each arm's state is put aside while the
    other computes, so each samples the stream it would sample alone (both start from the seed).
    """

    def __init__(self, name: str, turnstile: Turnstile):
        self.name, self.turnstile = name, turnstile
        self.seconds: list[float] = []
        self.logs: dict[int, dict] = {}
        self.started = 0.0

    def on_train_begin(self, args, state, control, **kwargs):
        from transformers import set_seed

        self.turnstile.wait(self.name)
        set_seed(args.seed)
        self.started = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self.seconds.append(time.perf_counter() - self.started)
        generators = (random.getstate(), np.random.get_state(), torch.get_rng_state())
        self.turnstile.hand_over(self.name)
        self.turnstile.wait(self.name)
        random.setstate(generators[0])
        np.random.set_state(generators[1])
        torch.set_rng_state(generators[2])
        self.started = time.perf_counter()

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "reward" in logs:
            self.logs[state.global_step] = {"reward": logs["reward"], "length": logs.get("completions/mean_length")}


# ---------------------------------------------------------------- the bare arm's rewards


def boxed_integer_accuracy(completions, answer, **kwargs) -> list[float]:
    """1.0 when the final answer boxes exactly one distinct number (after any `x =`) equal to the gold, else 0.0."""
    scores = []
    for completion, gold in zip(completions, answer, strict=True):
        text = completion[0]["content"] if isinstance(completion, list) else completion
        text = text.rsplit("</think>", 1)[-1] if "</think>" in text else ("" if "<think>" in text else text)
        boxed = {_ASSIGNMENT.sub("", value.strip()) for value in _BOXED.findall(text)}
        try:
            correct = len(boxed) == 1 and float(boxed.pop()) == float(gold)
        except ValueError:
            correct = False
        scores.append(float(correct))
    return scores


def bare_rewards(specs: list[dict]) -> list:
    """Plain functions with the meaning of our registry rewards, one per spec (same order, same weights)."""
    from trl.rewards import get_soft_overlong_punishment

    functions = []
    for spec in specs:
        name = spec["name"] if isinstance(spec, dict) else spec
        if name == "math_accuracy":
            functions.append(boxed_integer_accuracy)
        elif name == "overlong":
            functions.append(get_soft_overlong_punishment(spec.get("max_len", 4096), spec.get("buffer", 1024)))
        else:
            raise SystemExit(f"no bare equivalent of reward {name!r}: pass --bare-rewards registry")
    return functions


# ---------------------------------------------------------------- building the two arms


def parse_config(config: Path, model: Path, output_dir: Path, steps: int):
    """recipes/grpo.py's own command line (make_parser) with the benchmark's overrides."""
    from recipes import grpo

    overrides = [
        "--config", str(config), "--model_name_or_path", str(model), "--output_dir", str(output_dir),
        "--max_steps", str(steps), "--dynamic_sampling", "false", "--logging_steps", "1",
        "--save_strategy", "no", "--report_to", "none", "--disable_tqdm", "true", "--use_cpu", "true",
    ]  # fmt: skip
    return grpo.make_parser().parse_args(overrides)


def build_trainer(arm: str, args, output_dir: Path, clock: StepClock):
    """One arm's trainer, on a fresh copy of the model from disk: ours is the recipe's own (grpo_setup.build_trainer)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, PrinterCallback
    from trl import GRPOTrainer

    from recipes.stages.grpo import setup as grpo_setup
    from rewards import build_rewards
    from tasks.schema import load_rows

    model = args.model
    script_args, training_args, model_args = parse_config(args.config, model, output_dir, args.warmup + args.steps)
    if arm == "ours":
        trainer = grpo_setup.build_trainer(script_args, training_args, model_args, callbacks=(clock,)).trainer
    else:
        grpo_setup.set_generation_kv_cache(
            training_args
        )  # what the recipe does to the config: both arms get the same GRPOConfig
        rows = load_rows(script_args)
        registry_functions, weights = build_rewards(script_args.rewards)
        training_args.reward_weights = weights
        functions = registry_functions if args.bare_rewards == "registry" else bare_rewards(script_args.rewards)
        trainer = GRPOTrainer(
            model=AutoModelForCausalLM.from_pretrained(model, dtype=getattr(torch, model_args.dtype or "float32")),
            reward_funcs=functions,
            args=training_args,
            train_dataset=rows,
            processing_class=AutoTokenizer.from_pretrained(model),
            callbacks=[clock],
        )
    trainer.remove_callback(PrinterCallback)  # no log dict printed per step, in either arm
    return trainer


def run_pair(args, scratch: Path, order: tuple[str, str]) -> dict[str, StepClock]:
    """Both arms trained at once, in two threads taking turns step by step, `order[0]` first."""
    turnstile = Turnstile(*order)
    clocks = {arm: StepClock(arm, turnstile) for arm in order}
    trainers = {arm: build_trainer(arm, args, scratch / arm, clocks[arm]) for arm in order}
    errors: dict[str, BaseException] = {}

    def train(arm: str) -> None:
        try:
            trainers[arm].train()
        except BaseException as error:  # re-raised in the main thread below
            errors[arm] = error
        finally:
            turnstile.finish(arm)

    threads = [threading.Thread(target=train, args=(arm,), name=arm) for arm in order]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        arm, error = next(iter(errors.items()))
        raise RuntimeError(f"the {arm} arm failed") from error
    return clocks


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--model",
        type=Path,
        default=DEFAULT_MODEL,
        help="the cold-start model (built if missing at the demo's own path, run from the repo root)",
    )
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="a recipes/grpo.py YAML config")
    parser.add_argument("--repeats", type=int, default=2, help="pairs of fresh trainers; who goes first alternates")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per arm and repeat")
    parser.add_argument("--warmup", type=int, default=2, help="steps per arm and repeat left out of the timing")
    parser.add_argument(
        "--bare-rewards", choices=("plain", "registry"), default="plain",
        help="the bare arm's rewards: plain functions of the same meaning, or the registry's own (then only "
        "the trainer subclass and the monitor differ)",
    )  # fmt: skip
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args = parser.parse_args(argv)

    from transformers.utils import logging as hf_logging

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    hf_logging.disable_progress_bar()
    torch.set_num_threads(args.threads)
    from recipes.common.model.loading import resolve_model_path

    resolve_model_path(str(args.model), if_missing="cold_start")  # the demo's cold start, built when missing
    seconds: dict[str, list[float]] = {"ours": [], "bare": []}
    paired: list[float] = []  # ours / bare for the same step of the same repeat: the same work, moments apart
    agree = True
    with tempfile.TemporaryDirectory() as scratch:
        for repeat in range(args.repeats):
            order = ("ours", "bare") if repeat % 2 == 0 else ("bare", "ours")
            clocks = run_pair(args, Path(scratch) / str(repeat), order)
            timed = {arm: clock.seconds[args.warmup :] for arm, clock in clocks.items()}
            for arm in timed:
                seconds[arm] += timed[arm]
            paired += [ours / bare for ours, bare in zip(timed["ours"], timed["bare"], strict=True)]
            ours_logs, bare_logs = clocks["ours"].logs, clocks["bare"].logs
            same = ours_logs.keys() == bare_logs.keys() and all(
                abs(ours_logs[step]["reward"] - bare_logs[step]["reward"]) < 1e-6
                and ours_logs[step]["length"] == bare_logs[step]["length"]
                for step in bare_logs
            )
            agree = agree and same
            print(
                f"repeat {repeat + 1}/{args.repeats} ({order[0]} steps first): median ours "
                f"{statistics.median(timed['ours']):.3f} s/step, bare {statistics.median(timed['bare']):.3f} s/step; "
                f"same rewards and completion lengths at every step: {same}",
                flush=True,
            )

    ours, bare = statistics.median(seconds["ours"]), statistics.median(seconds["bare"])
    result = {
        "ours_s_per_step": ours,
        "bare_s_per_step": bare,
        "ratio": ours / bare,
        "paired_ratio": statistics.median(paired),
        "same_work": agree,
    }
    print()
    print(
        f"{args.config.name} with dynamic sampling off, model {args.model}; {args.repeats} repeat(s) x {args.steps} "
        f"timed steps per arm ({args.warmup} warm-up steps left out), the arms alternating step by step; "
        f"{args.threads} thread(s); bare rewards: {args.bare_rewards}"
    )
    print("| trainer | median s/step | steps timed |")
    print("|---|---:|---:|")
    print(f"| ours: RLVRGRPOTrainer + RLVRMonitor + registry rewards | {ours:.3f} | {len(seconds['ours'])} |")
    print(f"| bare: trl.GRPOTrainer | {bare:.3f} | {len(seconds['bare'])} |")
    print(
        f"ratio ours / bare: {result['ratio']:.3f} (target <= 1.05); median of the per-step paired ratios: "
        f"{result['paired_ratio']:.3f}"
    )
    print(f"both arms did the same work (rewards and completion lengths equal at every step): {agree}")
    return result


if __name__ == "__main__":
    main()
