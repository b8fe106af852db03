"""The sampler is not the policy that trains: its recorded log-probs, the mismatch logged, the ratio corrected.

The policy that sampled a completion is not bit for bit the policy that trains on it: another engine (vLLM),
another dtype (bf16 sampling), other kernels and batch shapes, or, with asynchronous generation, the weights
of an earlier step. The PPO ratio pi_theta / pi_old then starts from the wrong pi_old, and the clip does not
work as intended. TRL corrects this on its vLLM path only (`vllm_importance_sampling_correction`): a truncated
(or masked) importance weight pi_old / pi_sampler on each token or sequence. This module does the same for
the transformers path, where compact generation (recipes.stages.grpo.compact_generation) records each token's
sampling log-prob as vLLM does (`processed_logprobs`: after temperature, top-k and top-p):

* `importance_sampling_ratio`: TRL's four modes (`token_truncate`, `token_mask`, `sequence_truncate`,
  `sequence_mask`) with its clip bounds, written once here and checked against hand-computed values;
* `correct_for_sampler`: in the loss pass, pi_old is the trainer's own log-prob of the token (TRL's
  `old_per_token_logps` when it computed them, else the loss pass's own, detached: the same model when one
  generation batch is one optimizer step), so no extra forward pass is run; the ratio goes into the batch as
  `importance_sampling_ratio`, which TRL's loss multiplies in (and VESPO folds into its weight), and the
  mismatch is logged under the names TRL users know (`sampling/sampling_logp_difference/{mean,max}`,
  `sampling/importance_sampling_ratio/{min,mean,max}`) and verl users know (`training/rollout_probs_diff_
  {mean,max,std}`: the difference in probability).
TRL's options decide it (`vllm_importance_sampling_correction`, `_mode`, `_clip_min`, `_clip_max`), so one
config means the same on both paths.

On TRL's vLLM path TRL corrects itself, at generation: it runs the policy over every generated row once more
for pi_old, for this ratio alone. When one generation batch is one optimizer step (TRL's own test for needing
pi_old: gradient_accumulation_steps a multiple of steps_per_generation x num_iterations) that pass computes
what the loss pass computes anyway, so the trainer moves the correction into the loss
pass as on the transformers path (`defer_to_loss_pass`): the same ratio, without the extra pass (on SmolLM2, dapo_lora.yaml, with
vLLM on a CPU that pass was 70-96 s of a 145-180 s step: scripts/bench/rollout_cost.py).
"""

from __future__ import annotations

import math

import torch

MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")


def importance_sampling_ratio(
    policy_logps: torch.Tensor,
    sampling_logps: torch.Tensor,
    mask: torch.Tensor,
    mode: str = "sequence_mask",
    clip_min: float | None = None,
    clip_max: float | None = 3.0,
) -> torch.Tensor:
    """pi_old / pi_sampler per token (B, T) or per sequence (B, 1), truncated to [clip_min, clip_max] or, in the
    mask modes, set to 0 outside it. Padding counts for nothing; a token whose sampling log-prob is NaN (the
    sampler could not give one) gets a ratio of 1 (its log difference is taken as 0)."""
    if mode not in MODES:
        raise ValueError(f"importance sampling mode must be one of {MODES}, got {mode!r}")
    difference = torch.nan_to_num((policy_logps - sampling_logps) * mask, nan=0.0)
    if mode.startswith("sequence"):
        difference = difference.sum(dim=-1, keepdim=True)
    ratio = torch.exp(difference)
    if mode.endswith("truncate"):
        return torch.clamp(ratio, min=clip_min, max=clip_max)
    low = -math.inf if clip_min is None else clip_min
    high = math.inf if clip_max is None else clip_max
    return ratio.masked_fill((ratio < low) | (ratio > high), 0.0)


def mismatch_metrics(policy_logps: torch.Tensor, sampling_logps: torch.Tensor, mask: torch.Tensor, ratio) -> dict:
    """What the sampler cost in policy difference, over the real tokens (NaN sampling log-probs left out)."""
    valid = mask.bool() & ~torch.isnan(sampling_logps)
    logp_gap = (policy_logps - sampling_logps)[valid].abs()
    prob_gap = (policy_logps.exp() - sampling_logps.exp())[valid].abs()
    ratios = ratio.flatten() if ratio.shape[-1] == 1 else ratio[mask.bool()]
    empty = torch.zeros(1)

    def stat(values: torch.Tensor, how) -> float:
        return float(how(values if values.numel() else empty))

    return {
        "sampling/sampling_logp_difference/mean": stat(logp_gap, torch.mean),
        "sampling/sampling_logp_difference/max": stat(logp_gap, torch.max),
        "sampling/importance_sampling_ratio/min": stat(ratios, torch.min),
        "sampling/importance_sampling_ratio/mean": stat(ratios, torch.mean),
        "sampling/importance_sampling_ratio/max": stat(ratios, torch.max),
        "training/rollout_probs_diff_mean": stat(prob_gap, torch.mean),
        "training/rollout_probs_diff_max": stat(prob_gap, torch.max),
        "training/rollout_probs_diff_std": stat(prob_gap, lambda v: v.std(unbiased=False)),
    }


def correction_applies(correction_on: bool, inputs: dict, training: bool) -> bool:
    """Whether the loss pass corrects this micro-batch: TRL's `vllm_importance_sampling_correction` on, the
    sampler's log-probs recorded, no ratio already there (TRL's vLLM path corrected at generation), in training."""
    return (
        correction_on
        and inputs.get("sampling_per_token_logps") is not None
        and "importance_sampling_ratio" not in inputs
        and training
    )


def defer_to_loss_pass(
    use_vllm: bool,
    correction_on: bool,
    training: bool,
    gradient_accumulation_steps: int,
    steps_per_generation: int,
    num_iterations: int,
) -> bool:
    """On TRL's vLLM path: whether generation skips its pi_old pass, the loss pass's own log-probs being pi_old (one
    generation batch, one optimizer step), and the loss pass corrects instead (module docstring). The trainer turns
    TRL's correction off for the length of generation where this holds."""
    generate_every = steps_per_generation * num_iterations
    return use_vllm and correction_on and training and gradient_accumulation_steps % generate_every == 0


def correct_for_sampler(
    inputs: dict, per_token_logps: torch.Tensor, mode: str, clip_min: float | None, clip_max: float | None
) -> dict[str, float]:
    """In the loss pass: the ratio pi_old / pi_sampler of every token of `inputs` put into it as
    `importance_sampling_ratio` (TRL's loss multiplies it in), and the mismatch metrics to log. pi_old is TRL's
    `old_per_token_logps` where it computed them, else the loss pass's own log-probs (`per_token_logps`,
    detached); tool results count for nothing."""
    old = inputs.get("old_per_token_logps")
    policy = (per_token_logps.detach() if old is None else old).float()
    sampling = inputs["sampling_per_token_logps"].to(policy.device).float()
    mask = inputs["completion_mask"] * inputs.get("tool_mask", 1)
    ratio = importance_sampling_ratio(policy, sampling, mask, mode, clip_min, clip_max)
    inputs["importance_sampling_ratio"] = ratio
    return mismatch_metrics(policy, sampling, mask, ratio)
