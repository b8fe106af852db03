"""Partial rollouts (recipes.stages.grpo.partial_rollouts): a completion cut at the step's segment and continued
the next step is the completion generated whole (tokens, the log-prob of each, the reward); a group trains only
once every member has finished; the carried groups survive a checkpoint; what it cannot serve is refused."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from eval.decoding import global_sampler, sample_tokens
from recipes.common.model.loading import SHIPPED_COLD_START
from recipes.stages.grpo.partial_rollouts import RowPlan, continue_rows
from tests.test_async_rollouts import _sequence_logps
from tests.test_sampler_correction import _trainer

PROMPTS = [[5, 17, 23, 42, 7, 9], [5, 17, 30, 11]]
STOP = {0}


def _sampler(model, temperature):
    pick = global_sampler(temperature, with_logprobs=True)

    def sample(prompts, steps, logprobs):
        return sample_tokens(
            model, prompts, max_new_tokens=steps, stop_ids=STOP, pad_id=0, pick=pick, logprobs=logprobs
        )

    return sample


def _in_segments(sample, prompts, segment, total) -> tuple[list[RowPlan], int]:
    """Each prompt's completion continued segment by segment until every row has finished; the steps it took."""
    plans, steps = [RowPlan() for _ in prompts], 0
    while True:
        continue_rows(sample, plans, prompts, segment=segment, max_new_tokens=total, stop_ids=STOP)
        steps += 1
        if all(plan.finished for plan in plans):
            return plans, steps
        plans = [RowPlan(plan.completion, plan.logprobs, plan.finished) for plan in plans]


def test_a_greedy_completion_continued_over_steps_is_the_one_generated_whole():
    model = AutoModelForCausalLM.from_pretrained(SHIPPED_COLD_START).eval()
    sample = _sampler(model, 0.0)  # greedy: the model's own script, whatever the random stream
    whole, _ = _in_segments(sample, PROMPTS, segment=24, total=24)
    split, steps = _in_segments(sample, PROMPTS, segment=5, total=24)
    assert steps > 2  # cut more than once
    assert [plan.completion for plan in split] == [plan.completion for plan in whole]
    assert all(len(plan.completion) == len(plan.logprobs) for plan in split)
    assert all(plan.completion[-1] in STOP or len(plan.completion) == 24 for plan in split)


def test_each_token_of_a_continued_completion_keeps_the_log_prob_of_the_whole_context():
    model = AutoModelForCausalLM.from_pretrained(SHIPPED_COLD_START).eval()
    torch.manual_seed(0)
    split, steps = _in_segments(_sampler(model, 1.5), PROMPTS * 2, segment=3, total=20)
    assert steps > 2
    for prompt, plan in zip(PROMPTS * 2, split, strict=True):
        own = _sequence_logps(model, prompt, plan.completion, 1.5)  # one forward pass over the whole completion
        assert torch.allclose(torch.tensor(plan.logprobs), own, atol=1e-4)


def test_a_row_that_finished_earlier_is_not_sampled_again_and_none_passes_the_length_limit():
    calls = []

    def sample(prompts, steps, logprobs):
        calls.append((prompts, steps))
        logprobs.extend([[-1.0] * steps for _ in prompts])
        return [[7] * steps for _ in prompts]  # never stops

    plans = [RowPlan([3, 0], [-0.5, -0.5], done=True), RowPlan([3, 4, 5], [-0.1] * 3), RowPlan()]
    continue_rows(sample, plans, [[1], [1], [2]], segment=4, max_new_tokens=5, stop_ids=STOP)
    assert calls == [([[1, 3, 4, 5], [2]], 4)]  # the finished row waits; the others from their tokens so far
    assert [plan.completion for plan in plans] == [[3, 0], [3, 4, 5, 7, 7], [7, 7, 7, 7]]
    assert [plan.logprobs for plan in plans] == [[-0.5, -0.5], [-0.1] * 3 + [-1.0] * 2, [-1.0] * 4]
    assert [plan.finished for plan in plans] == [True, True, False]  # 5 tokens: the limit; 4 of 5: still going


class _Recorder:
    """A reward that records what it scored: every group has variance (alternate members right)."""

    __name__ = "accuracy"

    def __init__(self):
        self.calls: list[tuple[list, list]] = []

    def __call__(self, prompts, completions, completion_ids, **kwargs):
        self.calls.append((prompts, [list(ids) for ids in completion_ids]))
        return [float(index % 2) for index in range(len(completions))]


def _partial_trainer(tmp_path, reward, levels=(1, 4), **options):
    """Level-1 problems take the tiny model about 19 tokens, level-4 ones about 28: a segment of 22 finishes the
    first within their step and carries the second to the next."""
    return _trainer(
        tmp_path, temperature=0.9, reward_funcs=[reward], rows=200, levels=levels, learning_rate=0.0,
        dynamic_sampling=True, dynamic_sampling_max_rounds=4, variance_rewards=["accuracy"], accuracy_reward="accuracy",
        max_completion_length=40, partial_rollout_tokens=22, **options,
    )  # fmt: skip


def test_a_group_trains_once_all_its_members_finished_with_each_tokens_own_log_prob(tmp_path):
    reward = _Recorder()
    trainer = _partial_trainer(tmp_path, reward, max_steps=5)
    eos = set(trainer.eos_token_ids)
    trained = []
    finish = trainer.dynamic._finish

    def recording_finish(chosen, *rest):
        trained.append(list(chosen))
        return finish(chosen, *rest)

    trainer.dynamic._finish = recording_finish
    carried_after = []  # at the end of each step: (reward calls so far, the groups carried)
    end_step = trainer.partial.end_step

    def recording_end(target, metrics):
        end_step(target, metrics)
        carried = [(group.rows[0]["prompt"], group.completions, group.finished) for group in trainer.partial.carried]
        carried_after.append((len(reward.calls), carried))

    trainer.partial.end_step = recording_end
    trainer.train()
    steps = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert sum(entry.get("partial_rollouts/groups_continued", 0) for entry in steps) > 0
    # learning rate 0: the sampler is the trainer's policy, so every token's recorded log-prob, those sampled a step
    # before included, equals the loss pass's log-prob over the whole completion
    assert max(entry["sampling/sampling_logp_difference/max"] for entry in steps) < 1e-4
    # every trained completion finished (a stop token or the length limit), none cut at a segment, except in a step
    # that hit dynamic sampling's cap, where groups still generating complete the batch
    uncapped = [chosen for chosen, entry in zip(trained, steps, strict=True) if not entry["dynamic_sampling/cap_hit"]]
    assert uncapped
    for chosen in uncapped:
        for group in chosen:
            for ids, mask in zip(group.tensors["completion_ids"], group.tensors["completion_mask"], strict=True):
                tokens = ids[mask.bool()].tolist()
                assert tokens[-1] in eos or len(tokens) == 40
    # a carried completion is scored the next step from its tokens so far: those, then the rest
    checked = 0
    for (mark, carried), (next_mark, _) in zip(carried_after, carried_after[1:], strict=False):
        calls = reward.calls[mark:next_mark]
        scored = [(prompt, ids) for prompts, batch in calls for prompt, ids in zip(prompts, batch, strict=True)]
        for prompt, completions, finished in carried:
            for partial, done in zip(completions, finished, strict=True):
                whole = [ids for other, ids in scored if other == prompt and ids[: len(partial)] == partial]
                assert whole
                assert done or any(len(ids) > len(partial) for ids in whole)
                checked += 1
    assert checked


def test_the_carried_groups_are_saved_with_a_checkpoint_and_restored(tmp_path):
    # level-4 problems only: every step's fresh group outlasts the segment, so one is carried at every checkpoint
    trainer = _partial_trainer(tmp_path, _Recorder(), levels=(4,), max_steps=2, save_strategy="steps", save_steps=1)
    trainer.train()
    saved = [(group.rows, group.completions, group.logprobs, group.finished) for group in trainer.partial.carried]
    assert saved and not all(all(group[3]) for group in saved)
    resumed = _partial_trainer(tmp_path, _Recorder(), levels=(4,), max_steps=2)
    resumed._restore_rlvr_state(str(tmp_path / "checkpoint-2"))  # what resume_from_checkpoint calls
    assert [
        (group.rows, group.completions, group.logprobs, group.finished) for group in resumed.partial.carried
    ] == saved


def test_the_curriculum_takes_no_outcome_from_a_completion_still_generating(tmp_path):
    # level-4 problems only: every fresh group outlasts the segment; the one carried from step 0 finishes in step 1
    trainer = _partial_trainer(tmp_path, _Recorder(), levels=(4,), max_steps=2, sampler="pass_rate_weighted")
    observed = []
    end_step = trainer.partial.end_step

    def recording_end(target, metrics):
        end_step(target, metrics)
        observed.append(sum(count for _, count in trainer.curriculum.counts))

    trainer.partial.end_step = recording_end
    trainer.train()
    assert observed == [0, 1]  # step 0: every group still generating; step 1: the carried one, finished


def test_what_partial_rollouts_cannot_serve_is_refused_with_the_reason(tmp_path):
    with pytest.raises(ValueError, match="dynamic_sampling: true"):
        _trainer(tmp_path / "a", partial_rollout_tokens=4)
    with pytest.raises(ValueError, match="max_staleness: 0"):
        _trainer(tmp_path / "b", partial_rollout_tokens=4, dynamic_sampling=True, max_staleness=1)
    with pytest.raises(ValueError, match=">= 1"):
        _trainer(tmp_path / "c", partial_rollout_tokens=0)
