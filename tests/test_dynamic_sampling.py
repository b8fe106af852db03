"""Dynamic sampling's three modes (recipes/stages/grpo/dynamic_sampling.py) against figures worked out by hand.

A scripted reward decides which groups have variance: the k-th group generated in the run is zero-variance
or not as a fixed pattern says, whatever the tiny (untrained) model writes. So every round size, every
group that reaches the loss, the buffer's content and every logged count is known in advance; the
expected values below are worked out by hand in the comments, not computed by the code under test.
"""

from __future__ import annotations

import copy
import json

import pytest
import torch
from transformers import AutoModelForCausalLM, TrainerCallback

from recipes.stages.grpo.dynamic_sampling import adaptive_round_size, update_zero_std_estimate
from tasks.synthetic import generate_rows

G = 4  # completions per group; per_device_train_batch_size 16 makes the target 4 groups per step
V, Z = True, False  # a group with variance, a zero-variance group


class ScriptedReward:
    """Group k of the run (in generation order) scores [0, 1, 0, 1] if pattern[k] else [1, 1, 1, 1].

    Records each call (one per generation round) as the list of (row id, has variance) of its groups.
    """

    def __init__(self, pattern: list[bool]):
        self.pattern, self.rounds = list(pattern), []
        self.__name__ = "scripted"

    def __call__(self, completions, id, **kwargs):
        groups = len(completions) // G
        flags = self.pattern[:groups]
        assert len(flags) == groups, "the run generated more groups than the pattern scripts"
        del self.pattern[:groups]
        self.rounds.append([(id[group * G], flag) for group, flag in enumerate(flags)])
        return [float(i % 2) if flags[i // G] else 1.0 for i in range(len(completions))]


class Recorder(TrainerCallback):
    """Per step: the round sizes, the ids of the groups that reached the loss, the model before the update."""

    def __init__(self):
        self.trainer, self.sizes, self.chosen, self.models = None, [], [], []

    def on_step_begin(self, args, state, control, model=None, **kwargs):
        self.models.append(copy.deepcopy(model.state_dict()))

    def on_step_end(self, args, state, control, **kwargs):
        self.sizes.append(list(self.trainer.dynamic.last_round_sizes))
        self.chosen.append(list(self.trainer.dynamic.last_batch_group_ids))


def make_trainer(model_dir, out, pattern, mode, max_rounds, steps, **overrides):
    from datasets import Dataset

    from recipes.common.model.loading import load_tokenizer
    from recipes.common.training.monitor import RLVRMonitor
    from recipes.stages.grpo.config import RLVRGRPOConfig
    from recipes.stages.grpo.trainer import RLVRGRPOTrainer

    options = dict(
        output_dir=str(out), max_steps=steps, num_generations=G, per_device_train_batch_size=16,
        max_completion_length=8, learning_rate=1e-3, logging_steps=1, save_strategy="no", report_to=[],
        bf16=False, gradient_checkpointing=False, use_cpu=True, disable_tqdm=True, beta=0.0, seed=0,
        generation_kwargs={"use_cache": True}, dynamic_sampling=True, dynamic_sampling_max_rounds=max_rounds,
        dynamic_sampling_mode=mode, trim_padding=False, share_prompts=False,
    )  # fmt: skip
    options.update(overrides)
    reward, recorder = ScriptedReward(pattern), Recorder()
    trainer = RLVRGRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_dir),
        reward_funcs=[reward],
        args=RLVRGRPOConfig(**options),
        train_dataset=Dataset.from_list(generate_rows([1, 2, 3], 20, seed=5)),
        processing_class=load_tokenizer(str(model_dir)),
        callbacks=[recorder, RLVRMonitor(out)],
    )
    recorder.trainer = trainer
    return trainer, reward, recorder


def logged(out, key):
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [record.get(key) for record in records if "loss" in record]


def ids(rounds, picks):
    """The row ids of (round, group) picks from ScriptedReward.rounds."""
    return [rounds[r][g][0] for r, g in picks]


# ---------------------------------------------------------------- the sizing rule


@pytest.mark.parametrize(
    ("missing", "share", "ceiling", "expected"),
    [
        (3, 0.5, 12, 6),  # 3 / 0.5 = 6 exactly: no rounding up to 7
        (2, 0.75, 12, 8),  # 2 / 0.25
        (3, 0.6, 12, 8),  # 7.5 rounds up
        (3, 0.8, 12, 12),  # 15, over the ceiling
        (4, 1.0, 12, 12),  # nothing has had variance yet: the ceiling
        (3, None, 12, 3),  # no estimate yet: as many as missing
        (1, 0.0, 12, 1),
        (1, 0.01, 12, 2),  # 1.0101 rounds up
        (0, 0.9, 12, 0),  # nothing missing: no round
        (-2, 0.5, 12, 0),
    ],
)
def test_adaptive_round_size_by_hand(missing, share, ceiling, expected):
    assert adaptive_round_size(missing, share, ceiling) == expected


def test_the_running_zero_variance_estimate_by_hand():
    assert update_zero_std_estimate(None, 0.375) == 0.375  # the first step starts it
    assert update_zero_std_estimate(0.375, 11 / 15) == pytest.approx(0.5 * 0.375 + 0.5 * 11 / 15)


# ---------------------------------------------------------------- batch: as before the modes existed


def test_batch_mode_rounds_are_whole_batches_and_the_surplus_is_discarded(tiny_model_dir, tmp_path):
    # step 1: round 0 [Z V Z V] keeps 2, round 1 (4 groups) [V Z V V] keeps 3: 5 >= 4, the fifth is discarded
    # step 2: round 0 [V V V V] keeps 4
    pattern = [Z, V, Z, V] + [V, Z, V, V] + [V, V, V, V]
    trainer, reward, recorder = make_trainer(tiny_model_dir, tmp_path / "b", pattern, "batch", 3, 2)
    trainer.train()
    assert recorder.sizes == [[4, 4], [4]]
    assert recorder.chosen[0] == ids(reward.rounds, [(0, 1), (0, 3), (1, 0), (1, 2)])
    assert recorder.chosen[1] == ids(reward.rounds, [(2, 0), (2, 1), (2, 2), (2, 3)])  # no carried group
    assert logged(tmp_path / "b", "dynamic_sampling/groups_generated") == [8, 4]
    assert logged(tmp_path / "b", "dynamic_sampling/groups_kept_with_variance") == [4, 4]
    # completions generated / groups kept: 8 x 4 / 4 and 4 x 4 / 4
    assert logged(tmp_path / "b", "dynamic_sampling/completions_per_kept_group") == [8.0, 4.0]
    assert not reward.pattern  # every scripted group was generated, no more


# ---------------------------------------------------------------- reference: verl's DAPO loop


def test_reference_mode_accumulates_generation_batches_then_truncates(tiny_model_dir, tmp_path):
    twelve = [Z] * 12
    step1_b0 = [V if k in (3, 7) else Z for k in range(12)]  # 2 kept: not enough
    step1_b1 = [V if k in (0, 1, 2, 5, 11) else Z for k in range(12)]  # 5 more: 7 >= 4, truncated to 4
    step2_b0 = [V if k == 0 else Z for k in range(12)]  # 1 kept
    step2_b1 = [V if k == 4 else Z for k in range(12)]  # 1 more: 2 < 4 and the cap (1 extra batch) is spent
    pattern = step1_b0 + step1_b1 + step2_b0 + step2_b1
    assert len(pattern) == 4 * len(twelve)
    trainer, reward, recorder = make_trainer(tiny_model_dir, tmp_path / "r", pattern, "reference", 1, 2)
    trainer.train()
    assert recorder.sizes == [[12, 12], [12, 12]]  # generation batches of 3 x 4 groups
    assert recorder.chosen[0] == ids(reward.rounds, [(0, 3), (0, 7), (1, 0), (1, 1)])  # (1, 2), (1, 5), (1, 11) dropped
    # the cap: the 2 kept first, then the first zero-variance groups in generation order
    assert recorder.chosen[1] == ids(reward.rounds, [(2, 0), (3, 4), (2, 1), (2, 2)])
    out = tmp_path / "r"
    assert logged(out, "dynamic_sampling/groups_generated") == [24, 24]
    assert logged(out, "dynamic_sampling/groups_kept_with_variance") == [4, 2]
    assert logged(out, "dynamic_sampling/cap_hit") == [0.0, 1.0]
    assert logged(out, "dynamic_sampling/extra_rounds") == [1, 1]
    assert logged(out, "dynamic_sampling/completions_per_kept_group") == [24.0, 48.0]  # 24 x 4 / 4, 24 x 4 / 2


# ---------------------------------------------------------------- adaptive


ADAPTIVE_PATTERN = (
    [Z, V, Z, V] + [V, Z, V, V]  # step 1
    + [Z, Z, V, Z, Z] + [V, V, V, Z, Z, Z, Z, Z, Z, Z]  # step 2
    + [V, V, V, V, Z, Z, Z]  # step 3
)  # fmt: skip


def test_adaptive_rounds_are_sized_from_the_zero_variance_share(tiny_model_dir, tmp_path):
    """Target 4 groups, ceiling 12 (3 x 4). By hand:

    step 1: no estimate, buffer empty: round 0 = 4 (the dataloader's batch), [Z V Z V] keeps 2;
            share 2/4: round 1 = 2 / (1 - 0.5) = 4, [V Z V V] keeps 3; 5 kept, 4 used, 1 buffered.
            estimate = 3/8 (3 zero-variance of 8).
    step 2: buffer 1, missing 3: round 0 = ceil(3 / (1 - 3/8)) = ceil(4.8) = 5, [Z Z V Z Z] keeps 1;
            share 4/5: round 1 = 2 / (1 - 0.8) = 10, [V V V Z x7] keeps 3; used: buffer + 3, 1 buffered.
            estimate = 0.5 x 3/8 + 0.5 x 11/15 = 0.5541...
    step 3: buffer 1, missing 3: round 0 = ceil(3 / 0.4458...) = ceil(6.73) = 7, [V V V V Z Z Z] keeps 4;
            used: buffer + 3, 1 buffered.
    """
    out = tmp_path / "a"
    trainer, reward, recorder = make_trainer(
        tiny_model_dir, out, ADAPTIVE_PATTERN, "adaptive", 4, 3, save_strategy="steps", save_steps=1
    )
    trainer.train()
    assert recorder.sizes == [[4, 4], [5, 10], [7]]
    assert not reward.pattern
    rounds = reward.rounds
    # the buffer carries exactly the surplus group and the next step uses it first
    assert recorder.chosen[0] == ids(rounds, [(0, 1), (0, 3), (1, 0), (1, 2)])
    assert recorder.chosen[1] == ids(rounds, [(1, 3), (2, 2), (3, 0), (3, 1)])
    assert recorder.chosen[2] == ids(rounds, [(3, 2), (4, 0), (4, 1), (4, 2)])
    assert [group.row_id for group in trainer.dynamic.buffer] == ids(rounds, [(4, 3)])
    assert logged(out, "dynamic_sampling/groups_generated") == [8, 15, 7]
    assert logged(out, "dynamic_sampling/groups_kept_with_variance") == [4, 4, 4]
    assert logged(out, "dynamic_sampling/buffer_used") == [0, 1, 1]
    assert logged(out, "dynamic_sampling/buffer_carried") == [1, 1, 1]
    assert logged(out, "dynamic_sampling/extra_rounds") == [1, 1, 0]
    assert logged(out, "dynamic_sampling/completions_per_kept_group") == [8.0, 15.0, 7.0]  # x 4 / 4
    assert logged(out, "dynamic_sampling/zero_std_estimate") == [None, 0.375, pytest.approx(0.5541666, abs=1e-6)]

    # a run resumed from checkpoint-2 restores the buffer and the estimate: its step 3 is the same
    resumed, again, replay = make_trainer(tiny_model_dir, tmp_path / "c", ADAPTIVE_PATTERN[-7:], "adaptive", 4, 3)
    resumed.train(resume_from_checkpoint=str(out / "checkpoint-2"))
    assert replay.sizes == [[7]]  # not 3 (an empty estimate) nor 4 (an empty buffer)
    assert replay.chosen == [recorder.chosen[2]]
    assert [group.row_id for group in resumed.dynamic.buffer] == [group.row_id for group in trainer.dynamic.buffer]


def test_adaptive_respects_the_cap_and_the_ceiling(tiny_model_dir, tmp_path):
    """max_rounds 1, nothing ever has variance: round 0 = 4, then the share is 1 so round 1 = the ceiling
    (3 x 4 = 12), then the cap: 4 zero-variance groups complete the batch, and no ratio is logged (0 kept)."""
    out = tmp_path / "cap"
    trainer, reward, recorder = make_trainer(tiny_model_dir, out, [Z] * 16, "adaptive", 1, 1)
    trainer.train()
    assert recorder.sizes == [[4, 12]]
    assert recorder.chosen[0] == ids(reward.rounds, [(0, 0), (0, 1), (0, 2), (0, 3)])
    assert logged(out, "dynamic_sampling/cap_hit") == [1.0]
    assert logged(out, "dynamic_sampling/groups_kept_with_variance") == [0]
    assert logged(out, "dynamic_sampling/completions_per_kept_group") == [None]
    assert trainer.dynamic.buffer == []


def completion_logps(state_dict, model_dir, batch, rows) -> torch.Tensor:
    """log pi(completion token | prefix) for `rows` of a generation output, written out independently of TRL."""
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    model.load_state_dict(state_dict)
    prompt, completion = batch["prompt_ids"][rows], batch["completion_ids"][rows]
    mask = torch.cat([batch["prompt_mask"][rows], batch["completion_mask"][rows]], dim=1)
    with torch.no_grad():
        logits = model(input_ids=torch.cat([prompt, completion], dim=1), attention_mask=mask).logits
    logits = logits[:, prompt.shape[1] - 1 : -1]  # the logits that predict each completion token
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, completion.unsqueeze(-1)).squeeze(-1)


def test_a_buffered_group_carries_the_log_probs_of_the_policy_that_sampled_it(tiny_model_dir, tmp_path):
    """Step 2 trains on step 1's surplus group: its old log-probs are the step-1 model's, so TRL's ratio
    pi_theta / pi_old is right; the fresh groups' are the step-2 model's (their ratio starts at 1)."""
    out = tmp_path / "s"
    pattern = ADAPTIVE_PATTERN[:23]  # steps 1 and 2 of the test above
    trainer, reward, recorder = make_trainer(tiny_model_dir, out, pattern, "adaptive", 4, 2, learning_rate=2e-2)
    outputs = []
    sample = trainer.dynamic.sample

    def keep(inputs, io):
        outputs.append(sample(inputs, io))
        return outputs[-1]

    trainer.dynamic.sample = keep
    trainer.train()
    assert "old_per_token_logps" not in outputs[0]  # step 1 is all fresh: TRL's ratio of 1 holds
    batch = outputs[1]
    assert recorder.chosen[1][0] == reward.rounds[1][3][0]  # rows 0-3: the buffered group
    mask = batch["completion_mask"].bool()
    old = batch["old_per_token_logps"]
    buffered, fresh = slice(0, G), slice(G, 4 * G)
    step1 = completion_logps(recorder.models[0], tiny_model_dir, batch, buffered)
    step2_on_buffered = completion_logps(recorder.models[1], tiny_model_dir, batch, buffered)
    step2 = completion_logps(recorder.models[1], tiny_model_dir, batch, fresh)
    assert torch.allclose(old[buffered][mask[buffered]], step1[mask[buffered]], atol=1e-4)
    assert torch.allclose(old[fresh][mask[fresh]], step2[mask[fresh]], atol=1e-4)
    # and the update between the steps moved them, so the test could tell the two policies apart
    assert (step1 - step2_on_buffered)[mask[buffered]].abs().max() > 1e-2


# ---------------------------------------------------------------- two processes


@pytest.mark.skipif(torch.cuda.is_available(), reason="this launch tests the CPU (gloo) path")
def test_adaptive_two_processes_agree_on_round_sizes(tiny_model_dir, tmp_path):
    """tests/support/adaptive_two_processes.py, target 2 groups per process. By hand (global = both processes):

    step 1: round 0 = 2 each; rank 0 [V V] keeps 2, rank 1 [Z Z] none. Share 2/4: rank 0 wants 0 more,
            rank 1 wants 2 / 0.5 = 4, so both generate 4: rank 0 [V V V Z] buffers 3, rank 1 [V Z V Z]
            keeps 2. Estimate 5/12.
    step 2: rank 0 uses 2 of its 3 buffered (1 dropped) and wants 0; rank 1 wants ceil(2 / (7/12)) = 4;
            both generate 4: rank 0 [V Z Z Z] buffers 1, rank 1 [V V Z Z] keeps 2.
    """
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    out = tmp_path / "two"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    env.pop("WORLD_SIZE", None)
    command = [
        sys.executable, "-m", "accelerate.commands.launch", "--config_file",
        str(REPO / "recipes/accelerate/multi_cpu.yaml"), "--main_process_port", "0",
        str(REPO / "tests/support/adaptive_two_processes.py"), str(tiny_model_dir), str(out),
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600, cwd=REPO)
    assert result.returncode == 0, result.stderr[-4000:]
    ranks = [json.loads((out / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    assert [step["sizes"] for step in ranks[0]["steps"]] == [[2, 4], [4]]
    assert [step["sizes"] for step in ranks[1]["steps"]] == [[2, 4], [4]]
    assert [step["buffer"] for step in ranks[0]["steps"]] == [3, 1]
    assert [step["buffer"] for step in ranks[1]["steps"]] == [0, 0]
    assert ranks[0]["left"] == [] and ranks[1]["left"] == []
    assert logged(out, "dynamic_sampling/groups_generated") == [12, 8]
    assert logged(out, "dynamic_sampling/groups_kept_with_variance") == [4, 4]
    assert logged(out, "dynamic_sampling/completions_per_kept_group") == [12.0, 8.0]
    assert logged(out, "dynamic_sampling/buffer_used") == [0, 2]
    assert logged(out, "dynamic_sampling/buffer_dropped") == [0, 1]
    assert logged(out, "dynamic_sampling/buffer_carried") == [3, 1]
    assert logged(out, "dynamic_sampling/zero_std_estimate") == [None, pytest.approx(5 / 12)]
