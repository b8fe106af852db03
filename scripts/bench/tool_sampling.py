"""Benchmark: sampling with tools (eval/tools/trl_sampling.py: evaluation, rejection sampling and distillation with
`--tools`) four ways, side by side on the same problems and seed.

    python scripts/bench/tool_sampling.py [--model DIR] [--problems 2] [--n 4] [--repeats 2] [--max-new-tokens 256]

`--problems` held-out problems a level of `arithmetic-hard:1-4`, `--n` samples each at temperature 0.7, at most 3
python calls a completion (the tool arms' protocol, docs/what-tools-buy.md), through TRL's tool loop:
* `trl generate, a problem a batch`: each problem's n samples one TRL `generate` (the sampler before 08534e9);
* `trl generate, batched`: up to `--batch-size` rows of several problems in one TRL `generate`;
* `eval.decoding, batched`: each turn by eval/decoding.py (a repeated prompt prefilled once, a finished row out of
  the batch);
* `eval.decoding, shared prefixes`: and the start that a turn's prompts share (the tools' system block, a problem's
  prompt under each row's later turns) prefilled once: what the sampler does now.
Printed: each arm's median seconds over `--repeats` (the arm that goes first turning each repeat), samples/s, its
ratio to the first arm, and its samples' mean model tokens and tool calls (one distribution sampled four ways: a
check that they sample alike, not a comparison).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

ARMS = ("trl generate, a problem a batch", "trl generate, batched", "eval.decoding, batched",
        "eval.decoding, shared prefixes")  # fmt: skip
REPO = Path(__file__).resolve().parents[2]
DEFAULT_MODEL = REPO / "artifacts" / "demo-real" / "sft_tools"  # sft_tools.yaml's output_dir
TOOL_OPTIONS = {"timeout_s": 5, "memory_mb": 512, "max_output_chars": 500}  # dapo_tools.yaml's


def held_out_prompts(problems: int) -> list[list[dict]]:
    from tasks.datasets import load_eval_dataset

    # user_template None: each row's own, as eval.evaluate asks
    return [row["prompt"] for row in load_eval_dataset("arithmetic-hard:1-4", problems, user_template=None)]


def sample_arm(arm: str, model: str, prompts: list, n: int, max_new_tokens: int, batch_size: int) -> dict:
    """One arm's samples of `prompts`: seconds, samples, mean model tokens and tool calls a sample."""
    from trl import GRPOTrainer

    import eval.decoding as decoding
    from eval.sampling import SamplingParams
    from eval.tools.trl_sampling import make_tool_sampler

    sampler = make_tool_sampler(model, ["python"], TOOL_OPTIONS, max_tool_calls=3,
                                batch_size=n if arm == ARMS[0] else batch_size)  # fmt: skip
    build = sampler._build

    def with_trls_generate(params):
        trainer = build(params)
        trainer._decode_turn = lambda *args: GRPOTrainer._generate_single_turn(trainer, *args)
        return trainer

    if arm in ARMS[:2]:
        sampler._build = with_trls_generate
    shared = decoding.MIN_SHARED_PREFIX
    decoding.MIN_SHARED_PREFIX = shared if arm == ARMS[3] else 10**9  # no two prompts share that many: off
    params = SamplingParams(n=n, temperature=0.7, top_p=1.0, max_new_tokens=max_new_tokens, seed=0)
    try:
        sampler.trainer_for(params)  # built outside the clock
        start = time.perf_counter()
        samples = [sample for row in sampler.generate(prompts, params) for sample in row]
        seconds = time.perf_counter() - start
    finally:
        decoding.MIN_SHARED_PREFIX = shared
        sampler.close()
    return {"seconds": seconds, "samples": len(samples),
            "model_tokens": statistics.mean(sample.num_tokens for sample in samples),
            "tool_calls": statistics.mean(sample.tool_use["tool_calls"] for sample in samples)}  # fmt: skip


def figures(model: str, problems: int, n: int, repeats: int, max_new_tokens: int, batch_size: int) -> dict:
    prompts = held_out_prompts(problems)
    runs: dict[str, list[dict]] = {arm: [] for arm in ARMS}
    for repeat in range(repeats):
        order = ARMS[repeat % len(ARMS) :] + ARMS[: repeat % len(ARMS)]
        for arm in order:
            runs[arm].append(sample_arm(arm, model, prompts, n, max_new_tokens, batch_size))
    out = {}
    for arm, results in runs.items():
        seconds = statistics.median(result["seconds"] for result in results)
        out[arm] = {"seconds": seconds, "samples": results[0]["samples"],
                    "model_tokens": statistics.mean(r["model_tokens"] for r in results),
                    "tool_calls": statistics.mean(r["tool_calls"] for r in results)}  # fmt: skip
    first = out[ARMS[0]]["seconds"]
    for entry in out.values():
        entry["speedup"] = first / entry["seconds"] if entry["seconds"] > 0 else float("inf")
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL,
                        help="a tool cold start's folder (default: SmolLM2's, from sft_tools.yaml)")  # fmt: skip
    parser.add_argument("--problems", type=int, default=2, help="held-out problems a level (4 levels)")
    parser.add_argument("--n", type=int, default=4, help="samples a problem")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=64, help="rows a generation (evaluation's default)")
    args = parser.parse_args(argv)
    if not args.model.is_dir():
        raise SystemExit(f"tool_sampling: no model at {args.model}; make SmolLM2's tool cold start with `python "
                         "recipes/sft.py --config recipes/configs/smollm2-135m/sft_tools.yaml` or pass --model DIR")  # fmt: skip
    out = figures(str(args.model), args.problems, args.n, args.repeats, args.max_new_tokens, args.batch_size)
    print(f"{4 * args.problems} problems x {args.n} samples, median of {args.repeats} (arms turning):")
    print("| arm | s | samples/s | speed-up over the first | model tokens / sample | calls / sample |")
    print("|---|---:|---:|---:|---:|---:|")
    for arm, entry in out.items():
        print(f"| {arm} | {entry['seconds']:.1f} | {entry['samples'] / entry['seconds']:.2f} | "
              f"{entry['speedup']:.2f}x | {entry['model_tokens']:.1f} | {entry['tool_calls']:.2f} |")  # fmt: skip
    return out


if __name__ == "__main__":
    main()
