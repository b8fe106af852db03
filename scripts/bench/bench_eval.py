"""Benchmark: the batched transformers sampler against a plain loop of one `generate` call per sample.

    python scripts/bench/bench_eval.py [--problems 64] [--n 8] [--max-new-tokens 48] [--model DIR]

Both sample the same synthetic prompts at temperature 1 with the same length limit on the tiny model
(built on the spot unless --model is given), in one process, side by side. Printed: completions per
second of each and their ratio.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

from eval.sampler import SamplingParams, TransformersSampler, render_prompts  # noqa: E402
from tasks.synthetic import generate_rows  # noqa: E402


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=None, help="a saved model (default: a fresh tiny model)")
    parser.add_argument("--problems", type=int, default=64)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from recipes.common.model.tiny import build_tiny_model

    torch.set_num_threads(args.threads)
    model_dir = args.model or build_tiny_model(Path(tempfile.mkdtemp()) / "tiny")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    rows = generate_rows([2, 4], args.problems // 2, split="eval")
    prompts = [row["prompt"] for row in rows]
    params = SamplingParams(n=args.n, temperature=1.0, max_new_tokens=args.max_new_tokens, seed=0)
    total = len(prompts) * args.n

    started = time.perf_counter()
    batched = TransformersSampler(model, tokenizer, batch_size=args.batch_size).generate(prompts, params)
    batched_s = time.perf_counter() - started
    batched_tokens = sum(sample.num_tokens for samples in batched for sample in samples)

    texts = render_prompts(tokenizer, prompts)
    loop_tokens = 0
    started = time.perf_counter()
    with torch.no_grad():
        for text in texts:
            encoded = tokenizer(text, return_tensors="pt", add_special_tokens=False)
            for _ in range(args.n):
                output = model.generate(
                    **encoded, do_sample=True, temperature=1.0, max_new_tokens=args.max_new_tokens,
                    pad_token_id=tokenizer.pad_token_id,
                )  # fmt: skip
                loop_tokens += output.shape[1] - encoded["input_ids"].shape[1]
    loop_s = time.perf_counter() - started

    result = {"batched_per_s": total / batched_s, "loop_per_s": total / loop_s}
    print(f"{total} completions ({len(prompts)} problems x {args.n}), up to {args.max_new_tokens} new tokens, "
          f"{args.threads} thread(s)")  # fmt: skip
    print("| sampler | completions/s | tokens generated |")
    print("|---|---:|---:|")
    print(f"| TransformersSampler, batch {args.batch_size} | {result['batched_per_s']:.1f} | {batched_tokens} |")
    print(f"| one generate() per sample | {result['loop_per_s']:.1f} | {loop_tokens} |")
    print(f"ratio: {result['batched_per_s'] / result['loop_per_s']:.1f}x")
    return result


if __name__ == "__main__":
    main()
