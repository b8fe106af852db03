"""Benchmark: tokens per second of vLLM's CPU build against eval.decoding, on the same prompts and budget.

    make setup-vllm && .venv-vllm/bin/python scripts/bench/vllm_throughput.py [--model DIR] [--prompts 16]
        [--samples 4] [--max-new-tokens 128] [--rounds 3]

SmolLM2-135M-Instruct (artifacts/models/smollm2-135m-instruct, `make real-model`) by default: `--prompts`
arithmetic word problems of 1-3 steps (the DAPO config's), each sampled `--samples` times at temperature 1 with up
to `--max-new-tokens` tokens, as a GRPO step's generation is. eval.decoding (what compact generation runs in
recipes/grpo.py) in fp32 and vLLM (enforce_eager, as the recipes build it on a CPU) in fp32 and bf16, each in this
one process, one after the other; the first round of each warms up (oneDNN's first use, allocator), the mean of
the others is reported. Prints tokens/s of each and the ratios to eval.decoding.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def prompts_of(tokenizer, count: int) -> list[str]:
    from tasks.arithmetic import generate_rows

    rows = list(generate_rows([1, 2, 3], (count + 2) // 3, seed=5))[:count]
    return [tokenizer.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True) for row in rows]


def decoding_round(model, tokenizer, texts, samples, max_new_tokens) -> int:
    from eval.decoding import global_sampler, sample_tokens

    ids = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts for _ in range(samples)]
    out = sample_tokens(
        model, ids, max_new_tokens=max_new_tokens, stop_ids={tokenizer.eos_token_id},
        pad_id=tokenizer.pad_token_id, pick=global_sampler(1.0),
    )  # fmt: skip
    return sum(len(row) for row in out)


def vllm_round(llm, texts, samples, max_new_tokens) -> int:
    from vllm import SamplingParams

    outputs = llm.generate(texts, SamplingParams(n=samples, temperature=1.0, max_tokens=max_new_tokens), use_tqdm=False)
    return sum(len(completion.token_ids) for output in outputs for completion in output.outputs)


def measure(name: str, run, rounds: int) -> float:
    speeds = []
    for index in range(rounds):
        start = time.perf_counter()
        tokens = run()
        speeds.append(tokens / (time.perf_counter() - start))
        print(f"  {name} round {index}: {tokens} tokens, {speeds[-1]:.0f} tokens/s", flush=True)
    later = speeds[1:] or speeds
    return sum(later) / len(later)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=str(REPO / "artifacts" / "models" / "smollm2-135m-instruct"))
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    texts = prompts_of(tokenizer, args.prompts)
    print(f"{args.prompts} prompts x {args.samples} samples, up to {args.max_new_tokens} new tokens, {args.model}")
    print(f"torch threads: {torch.get_num_threads()}")
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    results = {"eval.decoding fp32": measure(
        "eval.decoding fp32",
        lambda model=model: decoding_round(model, tokenizer, texts, args.samples, args.max_new_tokens),
        args.rounds,
    )}  # fmt: skip
    del model
    from vllm import LLM

    for dtype in ("float32", "bfloat16"):
        llm = LLM(model=args.model, dtype=dtype, enforce_eager=True, max_model_len=1024, seed=0)
        name = f"vLLM {dtype}"
        results[name] = measure(
            name, lambda llm=llm: vllm_round(llm, texts, args.samples, args.max_new_tokens), args.rounds
        )
        del llm
    base = results["eval.decoding fp32"]
    print("\n| sampler | tokens/s | ratio to eval.decoding |\n|---|---|---|")
    for name, speed in results.items():
        print(f"| {name} | {speed:.0f} | {speed / base:.2f}x |")


if __name__ == "__main__":
    main()
