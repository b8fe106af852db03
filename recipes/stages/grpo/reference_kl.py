"""KL to the starting model, logged every step whatever `beta` is (`log_reference_kl`).

TRL computes the reference model's log-probs, and logs `kl`, only when `beta != 0`, for the KL term of the loss. A
DAPO run has `beta: 0`, and then no curve says how far the policy has moved from where it started: with entropy and
the mean within-group reward std, the curve that tells entropy collapse from a policy that merely got sure of
itself. This measures it without a loss term:

* the reference log-probs are computed once per generation batch, without gradient, with TRL's own reference: the
  policy with its LoRA adapter disabled (`trl.trainer.utils.use_adapter`), or for full fine-tuning a frozen copy of
  the starting weights, loaded on first use (one more model in memory). They travel in the batch as
  `ref_per_token_logps`, TRL's key, which its loss reads only when `beta != 0`;
* the policy's log-probs are the loss pass's own (detached), so the figure costs one forward pass a generation
  batch and nothing in the loss pass;
* logged as `kl`, TRL's name and estimator (k3, Schulman 2020: exp(r) - r - 1 with r = reference - policy, a
  per-token estimate of KL(policy || reference) that is never negative), the mean over the completion tokens of
  each micro-batch the loss trains on (gathered across processes).
"""

from __future__ import annotations

import logging

import torch

logger = logging.getLogger(__name__)

REF_LOGPS = "ref_per_token_logps"


def k3_kl(policy: torch.Tensor, reference: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(sum over the masked tokens of exp(r) - r - 1 with r = reference - policy, number of masked tokens)."""
    log_ratio = reference.float() - policy.float()
    per_token = torch.exp(log_ratio) - log_ratio - 1
    mask = mask.float()
    return (per_token * mask).sum(), mask.sum()


def reference_kl_on(log_reference_kl: bool, beta: float, training: bool) -> bool:
    """Whether this batch gets the reference's log-probs and its loss pass logs `kl`: asked for, no KL term (with
    one TRL computes and logs it itself), in training."""
    return bool(log_reference_kl) and beta == 0.0 and training


class FrozenReference:
    """The frozen starting weights of a fully fine-tuned policy, loaded on the first call (a LoRA policy needs none:
    `model` stays None): from where the policy was loaded, in its dtype, with TRL's fused LM head at the sampling
    temperature, as TRL prepares its own reference model. `trainer`: its accelerator, model, temperature, args."""

    def __init__(self, trainer):
        self.trainer, self.model = trainer, None

    def __call__(self):
        if self.model is None:
            from transformers import AutoModelForCausalLM
            from trl.trainer.utils import add_fused_lm_head

            policy = self.trainer.accelerator.unwrap_model(self.trainer.model)
            source = policy.config._name_or_path
            logger.info("log_reference_kl: a frozen copy of %s is the reference (one more model in memory)", source)
            dtype = next(policy.parameters()).dtype
            model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype).to(self.trainer.accelerator.device)
            model.eval().requires_grad_(False)
            add_fused_lm_head(
                model, temperature=self.trainer.temperature,
                cast_lm_head_to_fp32=self.trainer.args.cast_lm_head_to_fp32,
            )  # fmt: skip
            self.model = model
        return self.model


def reference_logps(batch: dict, logps_of, policy, unwrapped, reference) -> torch.Tensor:
    """The reference's log-prob of every completion token of `batch` (prompt and completion ids and masks), without
    gradient. `logps_of(model, ids, mask, completion_length)`: per-token log-probs as the trainer computes them.
    A LoRA policy (`unwrapped` a PeftModel) is its own reference with the adapter disabled (TRL's `ref` adapter
    where it has one); otherwise `reference()` gives the frozen copy."""
    from peft import PeftModel
    from trl.trainer.utils import use_adapter

    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    keep = batch["completion_ids"].size(1)
    with torch.no_grad():
        if isinstance(unwrapped, PeftModel):
            adapter = "ref" if "ref" in unwrapped.peft_config else None  # TRL's re-trained-adapter case
            with use_adapter(unwrapped, adapter_name=adapter):
                return logps_of(policy, ids, mask, keep)
        return logps_of(reference(), ids, mask, keep)


def reference_kl(per_token_logps: torch.Tensor, inputs: dict, reduce_sum) -> float:
    """The logged `kl` of one micro-batch: k3 of the loss pass's own log-probs (detached) against the reference's
    (inputs["ref_per_token_logps"]), over the completion tokens the loss trains on (tool results left out), the
    sums reduced over processes by `reduce_sum` (accelerate's reduce)."""
    mask = inputs["completion_mask"] * inputs.get("tool_mask", 1)
    total, count = k3_kl(per_token_logps.detach(), inputs[REF_LOGPS].to(per_token_logps.device), mask)
    totals = reduce_sum(torch.stack([total, count]))
    return (totals[0] / totals[1].clamp(min=1.0)).item()
