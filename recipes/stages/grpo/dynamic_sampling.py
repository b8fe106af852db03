"""Dynamic sampling (DAPO, Yu et al. 2025, section 3.2) for TRL's GRPOTrainer, in three modes.

A group whose rewards all agree has zero advantage and gives no gradient. Dynamic sampling keeps such
groups out of the loss by generating groups for further prompts until the step's batch holds `target`
groups with variance (per process), or until `dynamic_sampling_max_rounds` extra generation rounds are
spent; then zero-variance groups complete the batch and the step logs `dynamic_sampling/cap_hit`. The
modes differ in how much an extra round generates and what happens to a surplus:

* `batch`: every extra round generates a whole batch (`target` groups); groups with variance beyond
  `target` are discarded. The behaviour of this project before the modes existed.
* `reference`: DAPO's reference implementation, verl's `recipe/dapo/dapo_ray_trainer.py`
  (`RayDAPOTrainer.fit`, volcengine/verl): generation batches of `GENERATION_MULTIPLE` x the train batch
  (`run_dapo_qwen2.5_32b.sh`: gen_prompt_bsz = train_prompt_bsz * 3), groups with variance accumulated
  across generation batches until the train batch is full, the batch then truncated to the train size
  (the surplus is dropped), at most `max_num_gen_batches` generation batches (here 1 + max rounds). verl
  raises an error past its cap; here, as in the other modes, zero-variance groups complete the batch.
* `adaptive`: each round is sized from the share of zero-variance groups seen so far,
  missing / (1 - zero_std_frac) groups (`adaptive_round_size`: rounded up, at least 1, at most
  `GENERATION_MULTIPLE` x target). zero_std_frac is this step's share over its rounds so far; for a step's
  first round, a running estimate over past steps (`update_zero_std_estimate`; none yet: 0, so the first
  step's first round is the dataloader's batch). Groups with variance beyond `target` are not discarded:
  they wait in a buffer and are used first in the next step. All processes generate the same number of
  groups per round (the largest any of them asks for), because generation gathers across processes; a
  process that asked for fewer buffers the difference.

Staleness of the buffer (`adaptive`): a buffered group was sampled by the policy of the step before the
one that trains on it. Its sampling log-probabilities are recorded when it is buffered (TRL's
`old_per_token_logps`, computed with the model that generated it, before that step's update), so TRL's
PPO-clipped importance ratio pi_theta / pi_old is the right one for it; the step that uses it computes
the same log-probs for its fresh groups (for them the ratio is 1, as TRL assumes when it omits them). The
buffer's age is also bounded to one step: groups not used by the next step are dropped (logged as
`dynamic_sampling/buffer_dropped`), since an older group has drifted further off-policy and the clip
would silence more of its tokens. The buffer lives in memory and is saved with each checkpoint.

Every mode logs `dynamic_sampling/groups_generated`, `groups_kept_with_variance` (groups with variance
that reached the loss), `extra_rounds`, `cap_hit` and `completions_per_kept_group` (completions generated
in the step / groups with variance in its batch; NaN, hence left out of TRL's average, for a step that
kept none). In `adaptive` a buffered group was generated (and counted) in the step before the one that
keeps it, so read the ratio of run totals for exactness; adaptive also logs `buffer_used`,
`buffer_carried`, `buffer_dropped` and `zero_std_estimate`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from recipes.stages.grpo.partial_rollouts import PartialRollouts

logger = logging.getLogger(__name__)

MODES = ("batch", "reference", "adaptive")
GENERATION_MULTIPLE = 3  # verl's DAPO recipe: gen_prompt_bsz = train_prompt_bsz * 3; adaptive's ceiling per round
ESTIMATE_ALPHA = 0.5  # weight of the latest step in the running zero-variance share
OLD_LOGPS = "old_per_token_logps"
# Per-token tensors of the generation output: padded on the left (prompt) or on the right (completion).
LEFT_PADDED = {"prompt_ids", "prompt_mask"}
RIGHT_PADDED = {
    "completion_ids", "completion_mask", OLD_LOGPS, "ref_per_token_logps", "sampling_per_token_logps", "tool_mask",
}  # fmt: skip
PER_ROW = {"advantages"}
SCALARS = {"num_items_in_batch"}


@dataclass
class Group:
    """One prompt's num_generations completions, cut out of a generation output (rows of every tensor)."""

    tensors: dict
    row_id: object
    has_variance: bool


def adaptive_round_size(missing: int, zero_std_frac: float | None, ceiling: int) -> int:
    """Groups to generate so that about `missing` of them have variance: ceil(missing / (1 - z)), in [1, ceiling].

    0 when nothing is missing; `ceiling` when every group so far was zero-variance (z = 1).
    """
    if missing <= 0:
        return 0
    z = min(max(zero_std_frac or 0.0, 0.0), 1.0)
    if z >= 1.0:
        return ceiling
    wanted = math.ceil(missing / (1.0 - z) - 1e-9)  # the epsilon: 3 / (1 - 0.5) must be 6, not 7
    return min(max(wanted, 1), ceiling)


def update_zero_std_estimate(previous: float | None, observed: float, alpha: float = ESTIMATE_ALPHA) -> float:
    """The running share of zero-variance groups: an exponential average over steps, started at the first one."""
    return observed if previous is None else (1.0 - alpha) * previous + alpha * observed


def split_groups(batch: dict, g: int, row_ids: list, variances: list[bool]) -> list[Group]:
    """A generation output cut into its groups (each `g` consecutive rows)."""
    unsupported = set(batch) - LEFT_PADDED - RIGHT_PADDED - PER_ROW - SCALARS - {"importance_sampling_ratio"}
    if unsupported:
        raise ValueError(
            f"dynamic sampling cannot merge generation outputs holding {sorted(unsupported)} (multimodal inputs)"
        )
    groups = []
    for index, (row_id, has_variance) in enumerate(zip(row_ids, variances, strict=True)):
        rows = slice(index * g, (index + 1) * g)
        tensors = {key: value[rows] for key, value in batch.items() if key not in SCALARS}
        groups.append(Group(tensors, row_id, has_variance))
    return groups


def assemble(groups: list[Group], pad_token_id: int, keys=None) -> dict:
    """One generation output from whole groups of several, re-padded to common widths (no num_items_in_batch)."""
    out = {}
    for key in keys or groups[0].tensors:
        pieces = [group.tensors[key] for group in groups]
        if (
            key in LEFT_PADDED
            or key in RIGHT_PADDED
            or (key == "importance_sampling_ratio" and pieces[0].dim() == 2 and pieces[0].shape[1] > 1)
        ):
            width = max(piece.shape[1] for piece in pieces)
            value = pad_token_id if key in ("prompt_ids", "completion_ids") else 0
            side = "left" if key in LEFT_PADDED else "right"
            pieces = [pad(piece, width, value, side) for piece in pieces]
        out[key] = torch.cat(pieces, dim=0)
    return out


def pad(tensor: torch.Tensor, width: int, value, side: str) -> torch.Tensor:
    missing = width - tensor.shape[1]
    if missing <= 0:
        return tensor
    filler = torch.full((tensor.shape[0], missing), value, dtype=tensor.dtype, device=tensor.device)
    return torch.cat([filler, tensor] if side == "left" else [tensor, filler], dim=1)


class ExtraPrompts:
    """The stream dynamic sampling draws further prompts from: each process's own (seed, rank, position), with the
    curriculum's weights when there is one, so that a resumed run (its position, `draws`, saved with each
    checkpoint) draws what the interrupted one would have."""

    def __init__(self, seed: int, rank: int, group_size: int):
        self.seed, self.rank, self.group_size = seed, rank, group_size
        self.draws = 0  # prompts drawn so far: the position in the stream

    def draw(self, groups: int, dataset, weights=None, peek: bool = False) -> list[dict]:
        """`groups` prompts of `dataset`, each repeated group_size times (one group each), drawn with `weights`
        (None: uniform). `peek`: the prompts the next draw would give, the stream left where it is."""
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + self.rank * 7919 + self.draws)
        weights = torch.ones(len(dataset)) if weights is None else weights
        indices = torch.multinomial(weights, groups, replacement=True, generator=generator).tolist()
        self.draws += 0 if peek else groups
        return [dataset[index] for index in indices for _ in range(self.group_size)]


@dataclass
class RoundIO:
    """What dynamic sampling's rounds need of the trainer, for one step: explicit, so that the rounds can be read
    (and tested) without building one.

    `generate(rows)`: TRL's generation and scoring of the rows (every process's rows gathered), giving the
    generation output and every process's group spreads (group_spread); `extra_prompts(groups)`: further prompts
    from the trainer's stream; `gather(tensor)`: across processes; `process_index`; `policy_logps(batch)`: per-token
    log-probs of a merged batch's completions under the current policy; `pad_id`; `metrics`: the lists the step's
    log averages; `partial`: the run's PartialRollouts; `step`: the trainer's global step."""

    generate: Callable[[list[dict]], tuple[dict, torch.Tensor]]
    extra_prompts: Callable[[int], list[dict]]
    gather: Callable[[torch.Tensor], torch.Tensor]
    device: object
    process_index: int
    policy_logps: Callable[[dict], torch.Tensor]
    pad_id: int
    metrics: dict
    partial: PartialRollouts
    step: int


class DynamicSampler:
    """The rounds of each mode (module docstring) and what lives across steps: adaptive's buffer and estimate."""

    def __init__(self, mode: str, max_rounds: int, group_size: int):
        if mode not in MODES:
            raise ValueError(f"dynamic_sampling_mode must be one of {MODES}, got {mode!r}")
        self.mode, self.max_rounds, self.group_size = mode, max_rounds, group_size
        self.buffer: list[Group] = []  # adaptive: surplus groups with variance of the last step, used first next
        self.zero_std_estimate: float | None = None  # adaptive: running share of zero-variance groups
        self.last_batch_group_ids: list = []  # the row ids of the groups that reached the loss, for inspection
        self.last_round_sizes: list[int] = []  # groups this process generated in each round of the last step

    def sample(self, inputs: list[dict], io: RoundIO) -> dict:
        """The step's generation output: `inputs` (the dataloader's rows, num_generations per prompt) and as many
        extra rounds as the mode and the cap allow, filtered to groups with variance."""
        target = len(inputs) // self.group_size
        self.last_round_sizes = []
        if self.mode == "adaptive":
            return self._adaptive_rounds(inputs, target, io)
        return self._whole_batch_rounds(inputs, target, GENERATION_MULTIPLE if self.mode == "reference" else 1, io)

    def _whole_batch_rounds(self, inputs: list[dict], target: int, multiple: int, io: RoundIO) -> dict:
        """`batch` (multiple 1) and `reference` (multiple 3): rounds of multiple x target groups, surplus dropped."""
        kept, zero_variance = [], []
        rounds = 0
        batch_inputs = inputs if multiple == 1 else inputs + io.extra_prompts((multiple - 1) * target)
        while True:
            groups, _, _ = self._generate_round(batch_inputs, io)
            for group in groups:
                (kept if group.has_variance else zero_variance).append(group)
            short = torch.tensor([float(len(kept) < target)], device=io.device)
            if io.gather(short).max().item() == 0 or rounds >= self.max_rounds:
                break
            rounds += 1
            batch_inputs = io.extra_prompts(multiple * target)
        cap_hit = len(kept) < target
        if cap_hit:
            _warn_cap(len(kept), target, rounds)
        chosen = (kept + zero_variance)[:target]
        chosen += io.partial.reclaim(target - len(chosen))  # partial rollouts' groups still generating
        return self._finish(chosen, min(len(kept), target), rounds, cap_hit, {}, io)

    def _adaptive_rounds(self, inputs: list[dict], target: int, io: RoundIO) -> dict:
        """`adaptive`: the buffer first, then rounds sized from the zero-variance share; surplus buffered."""
        g, ceiling = self.group_size, GENERATION_MULTIPLE * target
        carried, self.buffer = self.buffer, []
        used, dropped = carried[:target], carried[target:]  # a buffered group lives one step at most
        kept, zero_variance = [], []
        seen_zero = seen_total = 0  # over this step's rounds, every process's groups
        estimate = self.zero_std_estimate
        while True:
            missing = target - len(used) - len(kept)
            share = seen_zero / seen_total if seen_total else estimate
            wanted = torch.tensor([adaptive_round_size(missing, share, ceiling)], device=io.device)
            size = int(io.gather(wanted).max().item())  # every process generates as many
            if size == 0 or len(self.last_round_sizes) > self.max_rounds:
                break
            if not self.last_round_sizes:  # the step's first round starts with the dataloader's prompts
                batch_inputs = inputs[: min(size, target) * g]
                if size > target:
                    batch_inputs = batch_inputs + io.extra_prompts(size - target)
            else:
                batch_inputs = io.extra_prompts(size)
            groups, zeros, total = self._generate_round(batch_inputs, io)
            seen_zero, seen_total = seen_zero + zeros, seen_total + total
            for group in groups:
                (kept if group.has_variance else zero_variance).append(group)
        need = target - len(used)
        chosen, surplus = used + kept[:need], kept[need:]
        cap_hit = len(chosen) < target
        if cap_hit:
            _warn_cap(len(chosen), target, max(len(self.last_round_sizes) - 1, 0))
            chosen = chosen + zero_variance[: target - len(chosen)]
            chosen += io.partial.reclaim(target - len(chosen))  # partial rollouts' groups still generating
        if len(chosen) < target:  # cannot happen: a first round generates at least the groups missing
            raise RuntimeError(f"dynamic sampling assembled {len(chosen)} of {target} groups")
        if seen_total:
            self.zero_std_estimate = update_zero_std_estimate(estimate, seen_zero / seen_total)
        self._record_sampling_logps(surplus, chosen[0], io)
        self.buffer = surplus
        self._complete_old_logps(chosen, io)
        counts = {"buffer_used": len(used), "buffer_carried": len(surplus), "buffer_dropped": len(dropped)}
        if estimate is not None:
            io.metrics["dynamic_sampling/zero_std_estimate"].append(estimate)
        rounds = max(len(self.last_round_sizes) - 1, 0)
        return self._finish(chosen, len(used) + min(len(kept), need), rounds, cap_hit, counts, io)

    def _generate_round(self, batch_inputs: list[dict], io: RoundIO) -> tuple[list[Group], int, int]:
        """Generate and score one round; its groups (this process's) and the zero-variance count over all."""
        g = self.group_size
        # recipes.stages.grpo.partial_rollouts: the carried groups join a step's first round
        batch_inputs = io.partial.round_inputs(batch_inputs, not self.last_round_sizes, io.step, io.metrics)
        batch, spread = io.generate(batch_inputs)
        local = len(batch_inputs) // g
        first = io.process_index * local  # this process's groups in the gathered tensor
        variances = [bool(value > 1e-6) for value in spread[first : first + local]]
        ids = [batch_inputs[group * g].get("id") for group in range(local)]
        self.last_round_sizes.append(local)
        groups = io.partial.set_aside_unfinished(split_groups(batch, g, ids, variances), batch_inputs)
        return groups, int((spread <= 1e-6).sum().item()), spread.numel()

    def _finish(self, chosen, kept_with_variance: int, rounds: int, cap_hit: bool, counts: dict, io) -> dict:
        """Log the step's metrics (summed over processes) and assemble the chosen groups into one output."""
        self.last_batch_group_ids = [group.row_id for group in chosen]
        io.partial.end_step(len(chosen), io.metrics)  # recipes.stages.grpo.partial_rollouts: what is carried
        local = [sum(self.last_round_sizes), kept_with_variance, *counts.values()]
        totals = io.gather(torch.tensor(local, device=io.device))
        totals = totals.view(-1, len(local)).sum(dim=0).tolist()
        metrics = io.metrics
        metrics["dynamic_sampling/groups_generated"].append(totals[0])
        metrics["dynamic_sampling/groups_kept_with_variance"].append(totals[1])
        metrics["dynamic_sampling/extra_rounds"].append(rounds)
        metrics["dynamic_sampling/cap_hit"].append(float(cap_hit))
        per_kept = totals[0] * self.group_size / totals[1] if totals[1] else float("nan")
        metrics["dynamic_sampling/completions_per_kept_group"].append(per_kept)
        for name, total in zip(counts, totals[2:], strict=True):
            metrics[f"dynamic_sampling/{name}"].append(total)
        out = assemble(chosen, io.pad_id)
        loss_mask = out["completion_mask"] if "tool_mask" not in out else out["completion_mask"] * out["tool_mask"]
        out["num_items_in_batch"] = io.gather(loss_mask.sum()).sum()
        return out

    # ------------------------------------------------------------ sampling log-probs of buffered groups

    def _record_sampling_logps(self, groups: list[Group], filler: Group, io: RoundIO) -> None:
        """Store, in each group that lacks them, the log-probs of its completions under the current policy.

        Called before the step's update, so the current policy is the one that sampled them. Every process
        runs the same forward passes (padded with copies of `filler`), as sharded models (ZeRO-3) require.
        """
        lacking = [group for group in groups if OLD_LOGPS not in group.tensors]
        count = int(io.gather(torch.tensor([len(lacking)], device=io.device)).max().item())
        if count == 0:
            return
        logps = self._policy_logps(lacking + [filler] * (count - len(lacking)), io)
        self._store_logps(lacking, logps, range(len(lacking)))

    def _complete_old_logps(self, chosen: list[Group], io: RoundIO) -> None:
        """When buffered groups (with recorded log-probs) meet fresh ones (without), give the fresh ones theirs."""
        flags = [any(OLD_LOGPS in g.tensors for g in chosen), any(OLD_LOGPS not in g.tensors for g in chosen)]
        flags = io.gather(torch.tensor(flags, device=io.device).float()).view(-1, 2)
        if not (flags[:, 0].max().item() and flags[:, 1].max().item()):
            return
        logps = self._policy_logps(chosen, io)  # every process: its whole batch, the same row count everywhere
        lacking = [index for index, group in enumerate(chosen) if OLD_LOGPS not in group.tensors]
        self._store_logps([chosen[index] for index in lacking], logps, lacking)

    def _store_logps(self, groups: list[Group], logps: torch.Tensor, positions) -> None:
        g = self.group_size
        for group, position in zip(groups, positions, strict=True):
            width = group.tensors["completion_ids"].shape[1]
            group.tensors[OLD_LOGPS] = logps[position * g : (position + 1) * g, :width]

    @staticmethod
    def _policy_logps(groups: list[Group], io: RoundIO) -> torch.Tensor:
        keys = ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask")
        return io.policy_logps(assemble(groups, io.pad_id, keys))


def _warn_cap(with_variance: int, target: int, rounds: int) -> None:
    logger.warning(
        "dynamic sampling: %d of %d groups have reward variance after %d extra rounds (the cap); "
        "%d zero-variance groups complete the batch",
        with_variance, target, rounds, target - with_variance,
    )  # fmt: skip
