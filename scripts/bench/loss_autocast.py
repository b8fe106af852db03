"""Benchmark: the GRPO loss pass (forward and backward over prompt + completion) in fp32 against bf16 autocast
(`bf16: true`, which accelerate runs as torch.autocast on a CPU; the weights and the optimizer stay fp32), side
by side on one batch: seconds each, their ratio, the machine's fp32 matmul peak and its bf16 speed-up at
decoding shapes (what `loss_dtype: auto` reads), and what bf16 changes
(the loss's relative difference, the cosine between the two gradients).

    python scripts/bench/loss_autocast.py [--model artifacts/models/smollm2-135m-instruct] [--lora]
        [--rows 16] [--prompt 96] [--completion 128] [--repeats 3]

The batch is a real one's shape: `rows` rows of `prompt` prompt tokens and `completion` completion tokens (random
ids, fixed seed), the loss the mean log-prob of the completion tokens, as the loss pass computes them. Without
--model, the tiny shipped model (a smoke run: its matmuls are too small for the timing to mean anything).
"""

from __future__ import annotations

import argparse
import sys
import time
from contextlib import nullcontext

import torch


def completion_logp(model, ids: torch.Tensor, prompt: int) -> torch.Tensor:
    """The mean log-prob of the completion tokens (those after `prompt`), as a loss pass computes them."""
    logits = model(input_ids=ids).logits[:, prompt - 1 : -1].float()
    return torch.log_softmax(logits, -1).gather(-1, ids[:, prompt:].unsqueeze(-1)).mean()


def one_pass(model, ids: torch.Tensor, prompt: int, bf16: bool) -> tuple[float, float, torch.Tensor]:
    """(seconds, loss, the flattened gradient) of one forward and backward."""
    model.zero_grad(set_to_none=True)
    started = time.perf_counter()
    with torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else nullcontext():
        loss = -completion_logp(model, ids, prompt)
    loss.backward()
    seconds = time.perf_counter() - started
    grads = [p.grad.flatten() for p in model.parameters() if p.grad is not None]
    return seconds, loss.item(), torch.cat(grads)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=None, help="a local model folder (default: the tiny shipped model)")
    parser.add_argument("--lora", action="store_true", help="train a LoRA adapter (r 32, all linear), as dapo_lora")
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--prompt", type=int, default=96)
    parser.add_argument("--completion", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    from transformers import AutoModelForCausalLM

    from recipes.common.model.loading import SHIPPED_COLD_START

    model = AutoModelForCausalLM.from_pretrained(args.model or SHIPPED_COLD_START, dtype=torch.float32)
    if args.lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=32, lora_alpha=64, target_modules="all-linear"))
    model.train()
    generator = torch.Generator().manual_seed(0)
    vocab = model.config.vocab_size
    ids = torch.randint(0, vocab, (args.rows, args.prompt + args.completion), generator=generator)
    runs = {}
    for _ in range(args.repeats):  # alternated, so that a slower minute of the machine falls on both
        for bf16 in (False, True):
            runs.setdefault(bf16, []).append(one_pass(model, ids, args.prompt, bf16))
    fp32, bf16 = (min(runs[key], key=lambda run: run[0]) for key in (False, True))
    cosine = torch.nn.functional.cosine_similarity(fp32[2].double(), bf16[2].double(), dim=0).item()
    print(f"threads {torch.get_num_threads()}, batch {args.rows} x ({args.prompt} + {args.completion}) tokens")
    from recipes.stages.grpo.sampling_dtype import bf16_speedup
    from recipes.stages.grpo.step_timing import matmul_peak_flops

    peak = matmul_peak_flops("cpu") / 1e9  # both measured once per machine and cached, as the recipes read them
    print(f"fp32 matmul peak {peak:.1f} GFLOP/s; bf16 / fp32 at decoding shapes {bf16_speedup():.2f}x")
    print("| loss pass | s (best) | ratio to fp32 | loss |")
    print("|---|---:|---:|---:|")
    print(f"| fp32 | {fp32[0]:.2f} | 1.00x | {fp32[1]:.5f} |")
    print(f"| bf16 autocast | {bf16[0]:.2f} | {bf16[0] / fp32[0]:.2f}x | {bf16[1]:.5f} |")
    print(f"loss relative difference {abs(bf16[1] - fp32[1]) / abs(fp32[1]):.2e}, gradient cosine {cosine:.5f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
