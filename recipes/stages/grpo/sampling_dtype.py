"""Sampling in bf16 where this machine multiplies bf16 faster than fp32, the weights that train staying fp32.

`sampling_dtype` (RLVRGRPOConfig), for compact generation (recipes.stages.grpo.compact_generation):
* `float32` (the default): the policy samples in the dtype it trains in;
* `bfloat16`: for the length of each generation, every parameter's data is swapped for a bf16 copy, and the
  very fp32 tensor is put back afterwards (`cast_for_sampling`): the optimizer and the loss pass see the fp32
  weights untouched, bit for bit. The log-prob each token was drawn with is the bf16 policy's, so the
  sampling-mismatch metrics (recipes.stages.grpo.sampler_correction) show what bf16 costs in policy difference,
  and the importance-sampling correction corrects for it, as on TRL's vLLM path, where the engine is another
  policy too;
* `auto`: bf16 where a matrix product at decoding shapes (SmolLM2-135M's MLP and LM head for 32 rows) runs at
  least `MIN_SPEEDUP` times faster in bf16 than in fp32 on this machine, fp32 elsewhere. Measured, not read from
  the CPU's flags: AMX, AVX512-BF16 without AMX and AVX2 (where bf16 is emulated) differ, and so do torch builds;
  the measurement is cached per machine key beside the matmul peak (recipes.stages.grpo.step_timing).
Not under DeepSpeed or FSDP, whose sharded parameters are theirs to manage: there `auto` is fp32 and `bfloat16`
is refused. fp32 stays the default so that the tiny model's samples in the test suite do not depend on which
kernels the machine running it has.
"""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager

import torch

logger = logging.getLogger(__name__)

CHOICES = ("float32", "bfloat16", "auto")
MIN_SPEEDUP = 1.25  # bf16 must beat fp32 by this much at decoding shapes for `auto` to choose it
CACHE_FILE = "bf16_speedup.json"
SHAPES = ((32, 576, 1536), (32, 576, 49152))  # (rows, in, out): an MLP projection and the LM head at decoding


@contextmanager
def cast_for_sampling(model, dtype: torch.dtype):
    """`model` with its floating parameters in `dtype` for the block; each parameter's own tensor put back after
    (the Parameter objects are the same, their data the very tensors they held). float32 or None: as it is."""
    if dtype in (None, torch.float32):
        yield model
        return
    swapped = []
    with torch.no_grad():
        for param in model.parameters():
            if param.dtype.is_floating_point and param.dtype != dtype:
                swapped.append((param, param.data))
                param.data = param.data.to(dtype)
    try:
        yield model
    finally:
        for param, original in swapped:
            param.data = original


def _measure_speedup(repeats: int = 5) -> float:
    """fp32 time / bf16 time of the SHAPES' products on the CPU, the best of `repeats` each."""
    generator = torch.Generator().manual_seed(0)  # the global RNG, hence training's samples, untouched
    seconds = {torch.float32: 0.0, torch.bfloat16: 0.0}
    for rows, inner, out in SHAPES:
        a = torch.randn(rows, inner, generator=generator)
        b = torch.randn(inner, out, generator=generator)
        for dtype in seconds:
            x, w = a.to(dtype), b.to(dtype)
            torch.mm(x, w)  # warm-up: kernels, packing
            best = float("inf")
            for _ in range(repeats):
                start = time.perf_counter()
                torch.mm(x, w)
                best = min(best, time.perf_counter() - start)
            seconds[dtype] += best
    return seconds[torch.float32] / seconds[torch.bfloat16]


def bf16_speedup(refresh: bool = False, directory=None) -> float:
    """How many times faster bf16 multiplies than fp32 at decoding shapes here, measured once per machine key."""
    from recipes.stages.grpo.step_timing import measured_once

    return measured_once(CACHE_FILE, "speedup", _measure_speedup, "cpu", refresh, directory)


def resolve_sampling_dtype(choice: str, sharded: bool, device_type: str = "cpu") -> torch.dtype:
    """The dtype compact generation samples in (see the module docstring)."""
    if choice not in CHOICES:
        raise ValueError(f"sampling_dtype must be one of {CHOICES}, got {choice!r}")
    if choice == "float32":
        return torch.float32
    if sharded:
        if choice == "bfloat16":
            raise ValueError("sampling_dtype: bfloat16 cannot swap DeepSpeed's or FSDP's sharded parameters; use auto")
        return torch.float32
    if choice == "bfloat16":
        return torch.bfloat16
    if device_type != "cpu":
        return torch.float32  # a GPU run samples with vLLM, in its own dtype
    speedup = bf16_speedup()
    chosen = torch.bfloat16 if speedup >= MIN_SPEEDUP else torch.float32
    logger.info("sampling_dtype auto: bf16 multiplies %.2fx as fast as fp32 here: sampling in %s", speedup, chosen)
    return chosen
