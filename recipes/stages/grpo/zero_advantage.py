"""`skip_zero_advantage` for RLVRGRPOTrainer: a cheaper loss pass (issue 25's measurements, docs/benchmarks.md
"Where a GRPO step's time goes").

Rows (`drop_zero_advantage_rows`) whose advantage is exactly zero (the groups whose
  rewards all agree, which dynamic sampling lets through past its cap) leave the loss pass. For the losses
  normalised by the generation batch's token count (dapo, cispo, vespo) without a KL term, an entropy bonus or
  an entropy mask, such a row contributes exactly zero loss and zero gradient, so the update is the same
  (up to the order of float sums); only the logged per-token metrics (entropy, clip ratios) then cover the
  rows that ran. One process only: with several, each keeps its rows (TRL gathers per-row metrics across
  processes, which needs equal row counts).
"""

from __future__ import annotations

import torch

from recipes.common import trl_private


class ZeroAdvantageMixin:
    """`skip_zero_advantage` for RLVRGRPOTrainer: `_prepare_inputs` drops the rows (`_drop_zero_advantage_rows`)
    where `_zero_rows_droppable`; a micro-batch left with none gives a zero loss without running the model."""

    def _zero_rows_droppable(self) -> bool:
        """Whether a row with zero advantage adds exactly nothing to this run's loss and gradient (module
        docstring): a loss normalised by the generation batch's tokens, no KL, no entropy bonus or entropy mask,
        no router aux loss."""
        return (
            self.args.skip_zero_advantage
            and self.loss_type in ("dapo", "cispo", "vespo")
            and self.beta == 0.0
            and not getattr(self, "_entropy_bonus_enabled", False)
            and self.top_entropy_quantile >= 1.0
            and not getattr(self, "aux_loss_enabled", False)
        )

    def _drop_zero_advantage_rows(self, inputs: dict) -> dict:
        if self.accelerator.num_processes > 1:
            # Every process must keep its rows: TRL's loss gathers per-row clip metrics across processes, which
            # needs the same row count on each (a mismatch aborted a two-process run), and DDP's reducer needs
            # every process's backward pass.
            return inputs
        kept, dropped = drop_zero_advantage_rows(inputs)
        if kept["advantages"].shape[0] == 0 and (self.is_deepspeed_enabled or self.is_fsdp_enabled):
            return inputs  # ZeRO and FSDP run their hooks in the model's own backward: let the zero batch run
        trl_private.metrics(self)["loss_pass/zero_advantage_rows_skipped"].append(dropped)
        return kept

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        advantages = inputs.get("advantages")
        if advantages is not None and advantages.shape[0] == 0:  # skip_zero_advantage left no row: nothing to run
            return sum((param.sum() * 0.0 for param in model.parameters() if param.requires_grad), torch.zeros(()))
        return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)


def drop_zero_advantage_rows(inputs: dict) -> tuple[dict, int]:
    """(the micro-batch without its rows whose advantages are all exactly zero, how many were dropped).

    Every tensor of one or more dimensions with a row per completion, and every list of that length, loses
    the same rows; anything else (num_items_in_batch, None) is kept. The caller decides whether the loss
    allows it (RLVRGRPOTrainer._zero_rows_droppable)."""
    advantages = inputs["advantages"]
    rows = advantages.shape[0]
    keep = (advantages != 0).reshape(rows, -1).any(dim=1)
    dropped = rows - int(keep.sum())
    if dropped == 0:
        return inputs, 0
    index = keep.nonzero().squeeze(-1)
    out = {}
    for key, value in inputs.items():
        if key == "num_items_in_batch":  # the generation batch's token count: the loss's normaliser, kept
            out[key] = value
        elif isinstance(value, torch.Tensor) and value.dim() >= 1 and value.shape[0] == rows:
            out[key] = value.index_select(0, index.to(value.device))
        elif isinstance(value, list) and len(value) == rows:
            out[key] = [value[row] for row in index.tolist()]
        else:
            out[key] = value
    return out, dropped
