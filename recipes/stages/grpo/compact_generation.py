"""Cheaper rollouts and loss passes for RLVRGRPOTrainer on the transformers path (issue 25's measurements,
docs/benchmarks.md "Where a GRPO step's time goes").

* `compact_generation` (`sample_compact`, where `compact_generation_applies`): sample with eval.decoding, where a finished row leaves the
  batch and a group's prompt is prefilled once (TRL's `generate` runs every row until the slowest stops);
  anything eval.decoding does not serve (vLLM, continuous batching, images, min_p, a repetition penalty,
  extra generation kwargs, greedy decoding) stays TRL's;
* `trim_padding` (`trim_micro_batch`): cut each micro-batch to its own longest prompt and completion (TRL pads
  every micro-batch to the longest of the whole generation batch); the loss is unchanged;
* `sampling_dtype` (recipes.stages.grpo.sampling_dtype): sample from the weights cast to bf16 where that is faster;
* `merge_adapter_for_generation` (`merged_lora`): a LoRA policy samples from its merged weights (one matmul a
  layer instead of three: 40.8 -> 38.1 s a step on SmolLM2 at 35c264a, scripts/bench/rollout_cost.py, within
  that machine's run-to-run spread), then the base weights are put back bit for bit, so training sees exactly the weights it would have seen;
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

from recipes.common import trl_private

# The per-token tensors of a GRPO micro-batch: prompt columns (left-padded) and completion columns (right-padded).
PROMPT_COLUMNS = ("prompt_ids", "prompt_mask")
COMPLETION_COLUMNS = (
    "completion_ids", "completion_mask", "old_per_token_logps", "ref_per_token_logps", "sampling_per_token_logps",
    "importance_sampling_ratio", "tool_mask",
)  # fmt: skip


# Generation keyword arguments eval.decoding already honours: the recipes set use_cache=True for TRL's generate
# (recipes.common.model.loading.with_kv_cache), and eval.decoding always samples with a KV cache.
SERVED_KWARGS = {"use_cache": True}


def compact_generation_applies(
    compact_generation: bool,
    use_vllm: bool,
    continuous_batching: bool,
    images,
    multimodal_fields,
    min_p: float | None,
    repetition_penalty: float,
    generation_kwargs: dict | None,
    temperature: float,
) -> bool:
    """eval.decoding serves plain-text sampling with temperature, top-p and top-k; anything else is TRL's."""
    return (
        compact_generation
        and not use_vllm
        and not continuous_batching
        and not images
        and not multimodal_fields
        and min_p is None
        and repetition_penalty == 1.0
        and all(SERVED_KWARGS.get(key) == value for key, value in (generation_kwargs or {}).items())
        and temperature > 0
    )


def max_new_tokens(trainer) -> int:
    """TRL's max_completion_length, named as this repository names it (here, once): the new tokens of a completion,
    and of each turn of TRL's tool loop."""
    return trainer.max_completion_length


def sampling_limits(trainer) -> dict:
    """Where a GRPO trainer's completion stops, as eval.decoding.sample_tokens takes it: TRL's max_completion_length
    mapped to max_new_tokens (`max_new_tokens`), the stop tokens and the padding; for the trainer's sampling and the
    rollout worker's alike. With tools, `share_prefixes`: a later turn's prompts (the group's prompt and each row's
    turns so far) have their common start prefilled once."""
    return {
        "max_new_tokens": max_new_tokens(trainer),
        "stop_ids": set(trainer.eos_token_ids),
        "pad_id": trl_private.pad_token_id(trainer),
        "share_prefixes": bool(getattr(trainer, "tools", None)),
    }


def sample_compact(model, prompt_ids, limits: dict, distribution: tuple) -> tuple[list[list[int]], list[list[float]]]:
    """Each prompt's completion ids and the log-prob each token was sampled with, as TRL's vLLM path hands them over
    (TRL's own transformers path has none): recipes.stages.grpo.sampler_correction compares them with the trainer's
    own. `distribution`: (temperature, top_p, top_k)."""
    from eval.decoding import global_sampler, sample_tokens

    logprobs: list[list[float]] = []
    pick = global_sampler(*distribution, with_logprobs=True)
    completion_ids = sample_tokens(model, prompt_ids, **limits, pick=pick, logprobs=logprobs)
    return completion_ids, logprobs


@contextmanager
def policy_as_it_samples(model_wrapped, accelerator, dist, gather_deepspeed3_params: bool, checkpointing_kwargs, merge):
    """The policy as compact generation samples from it, gradient-free: unwrapped from its distributed wrapper
    (ZeRO-3's parameters gathered, FSDP's summoned by TRL's `dist`) and, with `merge`, its LoRA adapter merged."""
    from trl.models import unwrap_model_for_generation

    with (
        unwrap_model_for_generation(
            model_wrapped,
            accelerator,
            gather_deepspeed3_params=gather_deepspeed3_params,
            gradient_checkpointing_kwargs=checkpointing_kwargs,
        ) as unwrapped_model,
        torch.no_grad(),
        dist.summon_full_params(model_wrapped, recurse=False),
        merged_lora(unwrapped_model, enabled=merge) as merged,
    ):
        yield merged


def trim_micro_batch(inputs: dict) -> dict:
    """The micro-batch with the prompt columns that are padding in every row cut from the left and the completion
    columns that are padding in every row cut from the right; the loss is unchanged (the cut columns are masked).

    Left untouched when the batch holds a per-token tensor of another kind (a multimodal model's), whose layout
    this does not know.
    """
    if any(
        isinstance(value, torch.Tensor) and value.dim() >= 2 and key not in PROMPT_COLUMNS + COMPLETION_COLUMNS
        for key, value in inputs.items()
    ):
        return inputs
    trimmed = dict(inputs)
    prompt_mask, completion_mask = inputs["prompt_mask"], inputs["completion_mask"]
    first = int(prompt_mask.any(dim=0).int().argmax()) if prompt_mask.any() else 0
    used = completion_mask.any(dim=0).nonzero()
    width = int(used[-1]) + 1 if len(used) else 1
    for key in PROMPT_COLUMNS:
        trimmed[key] = inputs[key][:, first:]
    for key in COMPLETION_COLUMNS:
        value = inputs.get(key)
        if isinstance(value, torch.Tensor) and value.dim() == 2 and value.shape[1] == completion_mask.shape[1]:
            trimmed[key] = value[:, :width]
    return trimmed


@contextmanager
def merged_lora(model, enabled: bool = True):
    """`model` with its LoRA adapter merged into the base weights for the block (peft's merge_adapter), then
    unmerged and every merged weight restored from a copy, bit for bit (W + BA - BA is not W in floats).

    A model that is not a PEFT LoRA model, has no LoRA layer, is already merged, or has a base weight that is
    not a plain float tensor (a quantised base) is yielded as it is; so is every model when `enabled` is false.
    The copy costs one float tensor per adapted weight (the adapted linear layers' size) for the block's length.
    """
    layers = _lora_layers(model) if enabled else []
    if not layers:
        yield model
        return
    saved = []
    for layer in layers:
        base = layer.get_base_layer()
        for name in ("weight", "bias"):
            tensor = getattr(base, name, None)
            if isinstance(tensor, torch.Tensor):
                saved.append((tensor, tensor.detach().clone()))
    model.merge_adapter()
    try:
        yield model
    finally:
        model.unmerge_adapter()
        with torch.no_grad():
            for tensor, original in saved:
                tensor.copy_(original)


def _lora_layers(model) -> list:
    """The LoRA layers of a PEFT LoRA model that merged_lora can merge and restore exactly; [] otherwise."""
    try:
        from peft import PeftModel, PeftType
        from peft.tuners.lora import LoraLayer
    except ImportError:  # peft is a dependency; a model that is not a PeftModel needs none of this
        return []
    if not isinstance(model, PeftModel) or model.peft_type != PeftType.LORA:
        return []
    layers = [module for module in model.modules() if isinstance(module, LoraLayer)]
    for layer in layers:
        weight = getattr(layer.get_base_layer(), "weight", None)
        if (
            layer.merged
            or not isinstance(weight, torch.Tensor)
            or not weight.dtype.is_floating_point
            or hasattr(weight, "quant_state")
        ):
            return []
    return layers
