"""Held-out pass@1 during training: a slice of problems the run never trains on, evaluated every `eval_steps`,
logged with its interval, and the rule that picks the checkpoint the run keeps.

TRL's own evaluation machinery runs it (`eval_strategy: steps`, `eval_steps`, `num_generations_eval`,
`per_device_eval_batch_size`): the trainer generates for the held-out prompts with the policy as it stands and
scores them with the training rewards. What this module adds, since TRL logs only the mean reward of the eval
batches: the accuracy reward's outcome per completion (`> 0`: right), pass@1 per problem (the share of its
samples that are right, the unbiased pass@1 estimate), and over problems the mean with a 95% percentile
bootstrap interval (eval.metrics.bootstrap_ci, as `python -m eval.evaluate` reports it), logged as
`eval_pass@1`, `eval_pass@1_low`, `eval_pass@1_high` and `eval_pass@1_problems` into metrics.jsonl.

The held-out rows come from `held_out:` (recipes.stages.grpo.arguments), a mapping of data options over the
training data's (e.g. `{dataset_seed: 1, dataset_num_rows: 64}`: the same generator, other problems; a
problem that is a training row too is left out, and counted in the log). The
checkpoint kept is fixed before the run by transformers' own options: `load_best_model_at_end: true` with
`metric_for_best_model: pass@1` keeps the best held-out checkpoint (saved every `save_steps`, a multiple of
`eval_steps`), otherwise the last; the run card says which (`kept_checkpoint`).
"""

from __future__ import annotations

import dataclasses
import json
import logging

import torch

logger = logging.getLogger(__name__)

METRIC = "pass@1"  # logged as eval_pass@1: what metric_for_best_model names


def held_out_data_args(data_args, held_out: dict):
    """The training data's options with `held_out`'s over them; an unknown key is one line naming it."""
    from basics.did_you_mean import unknown_names_message
    from tasks.data_arguments import DataArguments

    known = [spec.name for spec in dataclasses.fields(DataArguments)]
    unknown = sorted(set(held_out) - set(known))
    if unknown:
        raise ValueError(f"held_out: {unknown_names_message(unknown, known, 'data option')}")
    values = {name: getattr(data_args, name) for name in known}
    return DataArguments(**{**values, **held_out})


def without_training_problems(held_out, rows):
    """`held_out` less the problems that are also training rows (by `id` where both have one, else by prompt):
    a held-out problem the policy trains on measures memory, not generalisation. Each one left out is counted
    in the log; none left is an error."""
    key = "id" if "id" in held_out.column_names and "id" in rows.column_names else "prompt"

    def text(value) -> str:
        return value if isinstance(value, str) else json.dumps(value, sort_keys=True)

    trained = {text(value) for value in rows[key]}
    keep = [index for index, value in enumerate(held_out[key]) if text(value) not in trained]
    if not keep:
        raise ValueError(
            f"held_out: all {len(held_out)} held-out problems are training problems too (same {key}); take them "
            "from elsewhere, e.g. another dataset_seed or dataset_split"
        )
    if len(keep) < len(held_out):
        logger.warning("held_out: %d of %d problems are training problems too (same %s): left out",
                       len(held_out) - len(keep), len(held_out), key)  # fmt: skip
    return held_out.select(keep)


def pass_at_1_summary(per_problem: list[float]) -> dict:
    """eval_pass@1 (mean over problems), its 95% bootstrap interval and the problem count."""
    from eval.metrics import bootstrap_ci

    low, high = bootstrap_ci(per_problem)
    return {
        f"eval_{METRIC}": sum(per_problem) / len(per_problem),
        f"eval_{METRIC}_low": float(low),
        f"eval_{METRIC}_high": float(high),
        f"eval_{METRIC}_problems": len(per_problem),
    }


def kept_checkpoint(args, state) -> dict:
    """The rule fixed in the config and what it kept, for the run card."""
    if getattr(args, "load_best_model_at_end", False):
        return {
            "rule": f"best {args.metric_for_best_model}",
            "checkpoint": state.best_model_checkpoint,
            "metric": state.best_metric,
        }
    return {"rule": "last", "checkpoint": None, "step": state.global_step}


class HeldOutScores:
    """pass@1 per problem over one evaluation's batches, added to that evaluation's log once and then cleared."""

    def __init__(self):
        self.scores: list[float] = []

    def record(
        self, rewards_per_func: torch.Tensor, reward_names: list[str], accuracy: str, samples: int, training: bool
    ) -> None:
        """In evaluation, where the accuracy reward (`accuracy`) is among `reward_names`: every completion's outcome
        (the batch gathered across processes, so each problem's `samples` (num_generations_eval) are consecutive),
        right where the reward is above 0 (None, NaN, is wrong), averaged per problem."""
        if training or accuracy not in reward_names:
            return
        right = (torch.nan_to_num(rewards_per_func[:, reward_names.index(accuracy)], nan=0.0) > 0).float()
        self.scores += right.view(-1, samples).mean(dim=1).tolist()

    def into(self, logs: dict, training: bool) -> None:
        """An evaluation's log record gets eval_pass@1 and its interval, in place (transformers' evaluate()
        returns this very dict and picks the best checkpoint from it); the next evaluation starts afresh."""
        if not training and self.scores:
            logs.update(pass_at_1_summary(self.scores))
            self.scores = []
