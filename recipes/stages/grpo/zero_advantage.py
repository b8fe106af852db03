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


def zero_rows_droppable(
    skip_zero_advantage: bool,
    loss_type: str,
    beta: float,
    entropy_bonus: bool,
    top_entropy_quantile: float,
    aux_loss: bool,
) -> bool:
    """Whether a row with zero advantage adds exactly nothing to this run's loss and gradient (module docstring):
    asked for, a loss normalised by the generation batch's tokens, no KL, no entropy bonus or entropy mask, no
    router aux loss."""
    return (
        skip_zero_advantage
        and loss_type in ("dapo", "cispo", "vespo")
        and beta == 0.0
        and not entropy_bonus
        and top_entropy_quantile >= 1.0
        and not aux_loss
    )


def rows_to_train(inputs: dict, processes: int, sharded: bool) -> tuple[dict, int | None]:
    """(the micro-batch the loss pass runs, the rows left out of it or None where none may be).

    With several processes every one keeps its rows: TRL's loss gathers per-row clip metrics across processes,
    which needs the same row count on each (a mismatch aborted a two-process run), and DDP's reducer needs every
    process's backward pass. Under ZeRO or FSDP, whose hooks run in the model's own backward, a micro-batch left
    with no row runs whole."""
    if processes > 1:
        return inputs, None
    kept, dropped = drop_zero_advantage_rows(inputs)
    if kept["advantages"].shape[0] == 0 and sharded:
        return inputs, None
    return kept, dropped


def no_rows_left(inputs: dict) -> bool:
    """skip_zero_advantage left this micro-batch no row: the loss is zero without running the model."""
    advantages = inputs.get("advantages")
    return advantages is not None and advantages.shape[0] == 0


def zero_loss(model) -> torch.Tensor:
    """A loss of zero that still reaches every trainable parameter (so the optimizer step sees their gradients,
    all zero)."""
    return sum((param.sum() * 0.0 for param in model.parameters() if param.requires_grad), torch.zeros(()))


def drop_zero_advantage_rows(inputs: dict) -> tuple[dict, int]:
    """(the micro-batch without its rows whose advantages are all exactly zero, how many were dropped).

    Every tensor of one or more dimensions with a row per completion, and every list of that length, loses
    the same rows; anything else (num_items_in_batch, None) is kept. The caller decides whether the loss
    allows it (zero_rows_droppable)."""
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
