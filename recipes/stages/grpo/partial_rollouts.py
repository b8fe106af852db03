"""Partial rollouts (Kimi k1.5, Kimi Team 2025, section 2.6.2) for RLVRGRPOTrainer's compact generation: each
completion samples at most `partial_rollout_tokens` tokens in a step; one that has not finished by then is kept,
with its tokens and the log-prob each was sampled with, and continued in the next step with that step's weights.

Why: a step's generation lasts as long as its longest completion, and on a CPU the last few long rows run nearly
alone (the batch shrinks as rows finish). With a segment of N tokens a step's decoding runs N positions at most;
the long tail moves into later steps, where it runs beside fresh rows. TRL has no partial rollouts; verl's
`partial_rollout` interrupts vLLM at a weight sync and needs its fully asynchronous Ray trainer.

How it fits GRPO's groups: a group's advantage needs every member's reward, so a group with a member still
generating is set aside whole (scored, but neither trained nor counted as kept) and carried to the next step,
where it joins the first generation round: its unfinished members continue from their tokens (the prompt and
the tokens so far as the context, so the continuation is drawn from the same conditional distribution), its
finished members wait. A carried group comes first in the step's batch once finished. The rows of the step's
batch that the set-aside groups leave empty are filled as dynamic sampling fills those of zero-variance groups
(its extra rounds, which is why partial rollouts need `dynamic_sampling`); past dynamic sampling's cap,
set-aside groups complete the batch as they are (their completions cut, as at max_completion_length).

Off-policy: the tokens of a carried completion come from the weights of several steps. Each token keeps the
log-prob it was sampled with (`sampling_per_token_logps`), so the sampler correction
(recipes.stages.grpo.sampler_correction, TRL's `vllm_importance_sampling_*`) weighs each by pi_theta / its own
sampler. A group is carried for ceil(max_completion_length / partial_rollout_tokens) - 1 steps at most, and at
most one batch of groups is carried (the rest are dropped, logged).

Logged per step: `partial_rollouts/groups_set_aside` (in this step's rounds), `groups_continued` (carried in
from the step before), `groups_carried` (to the next step), `groups_dropped` and `oldest_segment` (steps since a
continued group's first token).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)


@dataclass
class Carried:
    """A group set aside with members still generating: its input rows and, per member, the tokens so far, their
    sampler log-probs and whether it has finished."""

    rows: list[dict]
    completions: list[list[int]]
    logprobs: list[list[float]]
    finished: list[bool]
    started: int  # the step of its first tokens


@dataclass
class RowPlan:
    """What one row of a training round starts from (fresh rows: nothing) and what it ended with."""

    prefix: list[int] = field(default_factory=list)
    prefix_logprobs: list[float] = field(default_factory=list)
    done: bool = False  # finished in an earlier step: not sampled again
    started: int = 0  # the step of the row's first tokens
    completion: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finished: bool = True


def continue_rows(sample, plans: list[RowPlan], prompts, *, segment: int, max_new_tokens: int, stop_ids) -> None:
    """Sample each unfinished row of `plans` on from its prefix: at most `segment` new tokens, and at most
    `max_new_tokens` in all. `sample(prompts, steps, logprobs)` is eval.decoding.sample_tokens with the model and
    the sampler bound. Fills each plan's completion (prefix + new), log-probs and `finished` (a stop token, or
    max_new_tokens reached)."""
    todo = [index for index, plan in enumerate(plans) if not plan.done]
    room = {index: min(segment, max_new_tokens - len(plans[index].prefix)) for index in todo}
    steps = max(room.values(), default=0)
    new_logprobs: list[list[float]] = []
    new = sample([list(prompts[index]) + plans[index].prefix for index in todo], steps, new_logprobs) if steps else []
    drawn = dict(zip(todo, zip(new, new_logprobs, strict=True), strict=True))
    for index, plan in enumerate(plans):
        tokens, logprobs = drawn.get(index, ([], []))
        tokens, logprobs = tokens[: room.get(index, 0)], logprobs[: room.get(index, 0)]
        plan.completion, plan.logprobs = plan.prefix + tokens, plan.prefix_logprobs + logprobs
        stopped = bool(plan.completion) and plan.completion[-1] in stop_ids
        plan.finished = plan.done or stopped or len(plan.completion) >= max_new_tokens


def partial_rollout_problems(
    dynamic_sampling: bool, compact_applies: bool, tools: bool, rollout_worker: bool, processes: int
) -> list[str]:
    """What keeps partial rollouts from this run; [] when nothing does. `tools`: tools, environments or a
    rollout_func are set."""
    problems = []
    if not dynamic_sampling:
        problems.append("dynamic_sampling: true (its extra rounds fill the rows of the groups set aside)")
    if not compact_applies:
        problems.append("compact generation (no vLLM, temperature > 0, no min_p or repetition penalty)")
    if tools:
        problems.append("no tools, environments or rollout_func")
    if rollout_worker:
        problems.append("max_staleness: 0 (the rollout worker does not continue completions yet)")
    if processes > 1:
        problems.append("one process (each process would carry its own number of groups into a round)")
    return problems


class PartialRollouts:
    """The groups a run carries between steps and the rows of the training round being generated. With `tokens`
    None (partial rollouts off) every method leaves the round as it is. Dynamic sampling's rounds call
    `round_inputs` before generating, `set_aside_unfinished` after, `reclaim` to complete a batch and `end_step`
    once the batch is chosen; compact generation calls `sample`."""

    def __init__(self, tokens: int | None, group_size: int):
        self.tokens, self.group_size = tokens, group_size
        self.carried: list[Carried] = []  # groups to continue in the next step (saved with each checkpoint)
        self.set_aside: list[tuple] = []  # this step's: (Group, Carried)
        self.plans: list[RowPlan] | None = None  # the rows of the training round being generated
        self.round_plans: list[RowPlan] | None = None  # the same, once generated

    def round_inputs(self, batch_inputs: list[dict], first_round: bool, step: int, metrics) -> list[dict]:
        """The round's input rows: on a step's first round, the carried groups' rows first; and each row's plan.
        `step`: the trainer's global step; `metrics`: the lists the step's log averages."""
        if not self.tokens:
            return batch_inputs
        plans = [RowPlan(started=step) for _ in batch_inputs]
        if first_round and self.carried:
            carried, self.carried = self.carried, []
            rows, carried_plans = [], []
            for group in carried:
                rows += group.rows
                carried_plans += [
                    RowPlan(list(ids), list(logprobs), done, group.started)
                    for ids, logprobs, done in zip(group.completions, group.logprobs, group.finished, strict=True)
                ]
            metrics["partial_rollouts/groups_continued"].append(float(len(carried)))
            metrics["partial_rollouts/oldest_segment"].append(float(step - min(group.started for group in carried)))
            batch_inputs, plans = rows + batch_inputs, carried_plans + plans
        self.plans = plans
        return batch_inputs

    def sample(self, model, prompt_ids, limits: dict, distribution: tuple, training: bool):
        """The planned round sampled a segment on (completions and their log-probs, as compact generation gives
        them), or None where no round is planned (evaluation, partial rollouts off): compact generation samples."""
        plans, self.plans = self.plans, None
        if plans is None or not training:
            return None
        if len(plans) != len(prompt_ids):
            raise RuntimeError(f"partial rollouts planned {len(plans)} rows, generation got {len(prompt_ids)}")
        from eval.decoding import global_sampler, sample_tokens

        pick = global_sampler(*distribution, with_logprobs=True)

        def sample(prompts, steps, logprobs):
            return sample_tokens(model, prompts, **{**limits, "max_new_tokens": steps}, pick=pick, logprobs=logprobs)

        continue_rows(sample, plans, prompt_ids, segment=self.tokens, max_new_tokens=limits["max_new_tokens"],
                      stop_ids=limits["stop_ids"])  # fmt: skip
        self.round_plans = plans
        return [plan.completion for plan in plans], [plan.logprobs for plan in plans]

    def unfinished_rows(self) -> list[bool]:
        """Per row of the training round just generated, whether it is still generating (its reward, scored on
        a cut text, is no outcome: the curriculum skips it); [] outside partial rollouts."""
        return [not plan.finished for plan in self.round_plans or []]

    def set_aside_unfinished(self, groups: list, batch_inputs: list[dict]) -> list:
        """The round's groups whose members have all finished; the others are set aside for the next step."""
        plans = self.round_plans
        if not self.tokens or plans is None:
            return groups
        self.round_plans = None
        g = self.group_size
        finished = []
        for index, group in enumerate(groups):
            members = plans[index * g : (index + 1) * g]
            if all(plan.finished for plan in members):
                finished.append(group)
                continue
            carried = Carried(
                rows=batch_inputs[index * g : (index + 1) * g],
                completions=[plan.completion for plan in members],
                logprobs=[plan.logprobs for plan in members],
                finished=[plan.finished for plan in members],
                started=members[0].started,
            )
            self.set_aside.append((group, carried))
        return finished

    def reclaim(self, count: int) -> list:
        """Up to `count` groups set aside this step, to complete a batch dynamic sampling could not fill: trained as
        they are, not carried. The youngest are taken (the last set aside), so that a group carried from earlier
        steps still gets to finish."""
        if count <= 0 or not self.set_aside:
            return []
        keep = max(len(self.set_aside) - count, 0)
        self.set_aside, taken = self.set_aside[:keep], self.set_aside[keep:]
        logger.warning(
            "partial rollouts: %d groups still generating complete the batch, their completions cut", len(taken)
        )
        return [group for group, _ in taken]

    def end_step(self, target: int, metrics) -> None:
        """The groups set aside this step become the ones carried to the next (one batch at most)."""
        if not self.tokens:
            return
        set_aside, self.set_aside = [carried for _, carried in self.set_aside], []
        self.carried, dropped = set_aside[:target], set_aside[target:]
        if dropped:
            logger.warning("partial rollouts: %d groups still generating dropped (one batch is carried)", len(dropped))
        metrics["partial_rollouts/groups_set_aside"].append(float(len(set_aside)))
        metrics["partial_rollouts/groups_carried"].append(float(len(self.carried)))
        metrics["partial_rollouts/groups_dropped"].append(float(len(dropped)))
