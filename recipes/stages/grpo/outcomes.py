"""What a batch's rewards say of each group and each completion, for the trainer's bookkeeping (none of it is in
the loss): a group's spread (what dynamic sampling filters on and the monitor watches) and each completion's
outcome for the pass-rate curriculum."""

from __future__ import annotations

import torch


def group_spread(
    rewards_per_func: torch.Tensor,
    rewards: torch.Tensor,
    reward_names: list[str],
    variance_rewards: list[str] | None,
    group_size: int,
) -> torch.Tensor:
    """Each group's reward spread, (num_groups,): what dynamic sampling and the monitor call its variance.

    With `variance_rewards` (by default the accuracy rewards), the largest within-group std of those rewards
    alone; otherwise (None) the std of the weighted sum `rewards`. DAPO filters on accuracy: with a length or
    format reward in the sum, a group whose answers are all wrong still varies in length, keeps a "variance" and
    passes the filter, and the policy then trains on length alone.
    """
    from trl.trainer.utils import nanstd

    if not variance_rewards:
        return torch.nan_to_num(nanstd(rewards.view(-1, group_size), dim=1), nan=0.0)
    columns = [reward_names.index(name) for name in variance_rewards]
    chosen = rewards_per_func[:, columns]  # (groups * group_size, len(columns))
    spread = nanstd(chosen.view(-1, group_size, len(columns)), dim=1)  # (groups, len(columns))
    return torch.nan_to_num(spread, nan=0.0).amax(dim=1)


def curriculum_outcomes(
    rewards_per_func: torch.Tensor,
    rewards: torch.Tensor,
    reward_names: list[str],
    accuracy: str,
    unfinished: list[bool],
) -> list[float | None]:
    """Each completion's outcome for the curriculum's pass rates: the accuracy reward (`accuracy`) where it is among
    the rewards, else whether the weighted sum is above 0; None where it was not scored (NaN) or where the completion
    is still generating (`unfinished`, partial rollouts: a reward on a cut text is no outcome; [] for none)."""
    if accuracy in reward_names:
        outcomes = rewards_per_func[:, reward_names.index(accuracy)]
    else:
        outcomes = (rewards > 0).float()
    values = [None if torch.isnan(value) else float(value) for value in outcomes]
    if len(unfinished) == len(values):
        values = [None if still else value for value, still in zip(values, unfinished, strict=True)]
    return values
