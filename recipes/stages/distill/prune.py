"""A smaller student cut from its teacher: the MLP of every layer narrowed to its most active neurons.

Minitron (Muralidharan et al. 2024, "Compact Language Models via Pruning and Knowledge Distillation")
prunes a trained model's width by activation importance and recovers the accuracy by distillation, at a
small fraction of the cost of training the student from scratch. This module does the pruning step for
the MLP width of Llama-family models (gate_proj / up_proj / down_proj: Llama, Qwen2, Mistral), the part
that holds most parameters; recipes/distill.py then fine-tunes the result on the teacher's traces.
What it adds to the libraries: `torch.nn.utils.prune` only masks weights (the model keeps its size) and
peft has no structured pruning, so the slicing is ours.

Importance of an intermediate neuron = the mean absolute value of its activation (the input of
down_proj) over the non-padding tokens of calibration texts; each layer keeps its top `intermediate_size`
neurons, in their original order.
"""

from __future__ import annotations

import logging

import torch

logger = logging.getLogger(__name__)


def _mlps(model) -> list:
    layers = getattr(getattr(model, "model", None), "layers", None)
    mlps = [getattr(layer, "mlp", None) for layer in layers or []]
    if not mlps or not all(hasattr(mlp, name) for mlp in mlps for name in ("gate_proj", "up_proj", "down_proj")):
        raise ValueError(
            f"cannot prune {type(model).__name__}: MLP-width pruning needs Llama-family layers "
            "(model.layers[i].mlp with gate_proj, up_proj, down_proj); use student_spec or a student model instead"
        )
    return mlps


@torch.no_grad()
def mlp_importance(model, tokenizer, texts: list[str], batch_size: int = 32, max_length: int = 256) -> list:
    """Per layer, the mean |activation| of each intermediate neuron over the texts' tokens."""
    mlps = _mlps(model)
    totals = [torch.zeros(mlp.down_proj.in_features, dtype=torch.float64) for mlp in mlps]
    mask_holder: dict = {}

    def hook(index):
        def accumulate(_module, inputs):
            activations = inputs[0].abs().double() * mask_holder["mask"].unsqueeze(-1)
            totals[index] += activations.sum(dim=(0, 1)).cpu()

        return accumulate

    handles = [mlp.down_proj.register_forward_pre_hook(hook(i)) for i, mlp in enumerate(mlps)]
    tokens = 0
    model.eval()
    try:
        for start in range(0, len(texts), batch_size):
            batch = tokenizer(
                texts[start : start + batch_size],
                return_tensors="pt",
                padding=True,
                truncation=True,
                max_length=max_length,
                add_special_tokens=False,
            ).to(model.device)
            mask_holder["mask"] = batch["attention_mask"].to(next(model.parameters()).dtype)
            tokens += int(batch["attention_mask"].sum())
            model(**batch)
    finally:
        for handle in handles:
            handle.remove()
    if tokens == 0:
        raise ValueError("no calibration tokens: pruning needs some text to measure activations on")
    return [total / tokens for total in totals]


def _slice_linear(linear: torch.nn.Linear, keep: torch.Tensor, dim: int) -> torch.nn.Linear:
    weight = linear.weight.index_select(dim, keep.to(linear.weight.device))
    bias = linear.bias
    if bias is not None and dim == 0:
        bias = bias.index_select(0, keep.to(bias.device))
    out_features, in_features = weight.shape
    new = torch.nn.Linear(in_features, out_features, bias=bias is not None, device=weight.device, dtype=weight.dtype)
    new.weight.data.copy_(weight)
    if bias is not None:
        new.bias.data.copy_(bias)
    return new


@torch.no_grad()
def prune_mlp_width(model, tokenizer, texts: list[str], intermediate_size: int, batch_size: int = 32):
    """Narrow every MLP of `model` (in place) to `intermediate_size` neurons; returns the model."""
    mlps = _mlps(model)
    current = mlps[0].down_proj.in_features
    if not 0 < intermediate_size <= current:
        raise ValueError(f"intermediate_size must be between 1 and the teacher's {current}, got {intermediate_size}")
    before = model.num_parameters()
    importance = mlp_importance(model, tokenizer, texts, batch_size=batch_size)
    for mlp, scores in zip(mlps, importance, strict=True):
        keep = torch.topk(scores, intermediate_size).indices.sort().values
        mlp.gate_proj = _slice_linear(mlp.gate_proj, keep, 0)
        mlp.up_proj = _slice_linear(mlp.up_proj, keep, 0)
        mlp.down_proj = _slice_linear(mlp.down_proj, keep, 1)
        if hasattr(mlp, "intermediate_size"):
            mlp.intermediate_size = intermediate_size
    model.config.intermediate_size = intermediate_size
    logger.info(
        "pruned the MLP width %d -> %d: %d -> %d parameters", current, intermediate_size, before, model.num_parameters()
    )
    return model
