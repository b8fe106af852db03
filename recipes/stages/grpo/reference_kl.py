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

from recipes.common import trl_private

logger = logging.getLogger(__name__)

REF_LOGPS = "ref_per_token_logps"


def k3_kl(policy: torch.Tensor, reference: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(sum over the masked tokens of exp(r) - r - 1 with r = reference - policy, number of masked tokens)."""
    log_ratio = reference.float() - policy.float()
    per_token = torch.exp(log_ratio) - log_ratio - 1
    mask = mask.float()
    return (per_token * mask).sum(), mask.sum()


class ReferenceKLMixin:
    """For RLVRGRPOTrainer: `_attach_reference_logps` after a batch is generated, `_measure_reference_kl` from the
    loss pass's own forward (called from the trainer's `_get_per_token_logps_and_entropies`)."""

    _kl_inputs: dict | None = None
    _kl_reference_model = None

    def _reference_kl_on(self) -> bool:
        return bool(getattr(self.args, "log_reference_kl", False)) and self.beta == 0.0 and self.model.training

    def _reference_model(self):
        """The frozen starting weights of a fully fine-tuned policy, loaded once (a LoRA policy needs none)."""
        if self._kl_reference_model is None:
            from transformers import AutoModelForCausalLM
            from trl.trainer.utils import add_fused_lm_head

            unwrapped = self.accelerator.unwrap_model(self.model)
            source = unwrapped.config._name_or_path
            logger.info("log_reference_kl: a frozen copy of %s is the reference (one more model in memory)", source)
            dtype = next(unwrapped.parameters()).dtype
            reference = AutoModelForCausalLM.from_pretrained(source, dtype=dtype).to(self.accelerator.device).eval()
            reference.requires_grad_(False)
            # as TRL prepares its own reference model: its log-probs come from the fused LM head, at the temperature
            add_fused_lm_head(
                reference, temperature=self.temperature, cast_lm_head_to_fp32=self.args.cast_lm_head_to_fp32
            )
            self._kl_reference_model = reference
        return self._kl_reference_model

    def _attach_reference_logps(self, batch: dict) -> None:
        """The reference's log-prob of every completion token of `batch`, as batch["ref_per_token_logps"]."""
        if not self._reference_kl_on() or batch.get(REF_LOGPS) is not None:
            return
        from peft import PeftModel
        from trl.trainer.utils import use_adapter

        ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
        mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
        keep = batch["completion_ids"].size(1)
        chunk = self.args.per_device_train_batch_size
        unwrapped = self.accelerator.unwrap_model(self.model)
        with torch.no_grad():
            if isinstance(unwrapped, PeftModel):
                adapter = "ref" if "ref" in unwrapped.peft_config else None  # TRL's re-trained-adapter case
                with use_adapter(unwrapped, adapter_name=adapter):
                    logps, _, _ = trl_private.per_token_logps_and_entropies(
                        self, self.model, ids, mask, keep, batch_size=chunk
                    )
            else:
                logps, _, _ = trl_private.per_token_logps_and_entropies(
                    self, self._reference_model(), ids, mask, keep, batch_size=chunk
                )
        batch[REF_LOGPS] = logps

    def _compute_loss(self, model, inputs):
        self._kl_inputs = inputs if self._reference_kl_on() and inputs.get(REF_LOGPS) is not None else None
        try:
            return super()._compute_loss(model, inputs)
        finally:
            self._kl_inputs = None

    def _measure_reference_kl(self, per_token_logps: torch.Tensor) -> None:
        inputs, self._kl_inputs = self._kl_inputs, None  # once per loss pass
        if inputs is None:
            return
        mask = inputs["completion_mask"] * inputs.get("tool_mask", 1)
        total, count = k3_kl(per_token_logps.detach(), inputs[REF_LOGPS].to(per_token_logps.device), mask)
        totals = self.accelerator.reduce(torch.stack([total, count]), reduction="sum")
        trl_private.metrics(self)["kl"].append((totals[0] / totals[1].clamp(min=1.0)).item())
