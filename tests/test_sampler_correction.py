"""The sampler's log-probs (issue 35, item 2): eval.decoding records the log-prob each token was drawn with, the
GRPO trainer logs the mismatch against its own under TRL's and verl's names, and corrects the loss with TRL's
truncated importance sampling on the transformers path; every figure checked against one worked out by hand."""

from __future__ import annotations

import math

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from eval.decoding import global_sampler, sample_tokens
from recipes.common.model.loading import SHIPPED_COLD_START
from recipes.stages.grpo.sampler_correction import importance_sampling_ratio, mismatch_metrics

MASK = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
# log pi_old - log pi_sampler per token: row 0 sums (real tokens) to log 4, row 1 to log 0.5
POLICY = torch.tensor([[math.log(2), math.log(2), 7.0], [math.log(0.5), 0.0, 0.0]])
SAMPLING = torch.zeros(2, 3)


@pytest.mark.parametrize(
    ("mode", "clip_min", "clip_max", "expected"),
    [
        ("token_truncate", None, 3.0, [[2.0, 2.0, 1.0], [0.5, 1.0, 1.0]]),  # padding: difference 0, ratio 1
        ("token_truncate", 0.8, 1.5, [[1.5, 1.5, 1.0], [0.8, 1.0, 1.0]]),
        ("token_mask", 0.8, 1.5, [[0.0, 0.0, 1.0], [0.0, 1.0, 1.0]]),
        ("sequence_truncate", None, 3.0, [[3.0], [0.5]]),  # exp(log 4) = 4, truncated to 3
        ("sequence_mask", None, 3.0, [[0.0], [0.5]]),  # 4 > 3: the whole sequence left out
        ("sequence_mask", 0.6, None, [[4.0], [0.0]]),
    ],
)
def test_the_ratio_in_each_mode_by_hand(mode, clip_min, clip_max, expected):
    ratio = importance_sampling_ratio(POLICY, SAMPLING, MASK, mode, clip_min, clip_max)
    torch.testing.assert_close(ratio, torch.tensor(expected))


def test_a_token_the_sampler_could_not_score_counts_as_no_correction():
    sampling = torch.tensor([[float("nan"), 0.0, 0.0], [0.0, 0.0, 0.0]])
    ratio = importance_sampling_ratio(POLICY, sampling, MASK, "token_truncate", None, 10.0)
    assert ratio[0, 0] == 1.0 and ratio[0, 1] == 2.0
    with pytest.raises(ValueError, match="mode must be one of"):
        importance_sampling_ratio(POLICY, SAMPLING, MASK, "token", None, 3.0)


def test_the_mismatch_metrics_by_hand():
    policy = torch.log(torch.tensor([[0.5, 0.25], [0.8, 0.1]]))
    sampling = torch.log(torch.tensor([[0.25, 0.25], [0.4, 0.9]]))
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])  # the last token is padding
    ratio = torch.tensor([[2.0, 1.0], [2.0, 1.0]])
    metrics = mismatch_metrics(policy, sampling, mask, ratio)
    logp_gaps = [math.log(2), 0.0, math.log(2)]
    prob_gaps = torch.tensor([0.25, 0.0, 0.4])
    assert metrics["sampling/sampling_logp_difference/mean"] == pytest.approx(sum(logp_gaps) / 3)
    assert metrics["sampling/sampling_logp_difference/max"] == pytest.approx(math.log(2))
    assert metrics["sampling/importance_sampling_ratio/min"] == 1.0
    assert metrics["sampling/importance_sampling_ratio/mean"] == pytest.approx(5 / 3)
    assert metrics["training/rollout_probs_diff_mean"] == pytest.approx(0.65 / 3)
    assert metrics["training/rollout_probs_diff_max"] == pytest.approx(0.4)
    assert metrics["training/rollout_probs_diff_std"] == pytest.approx(float(prob_gaps.std(unbiased=False)))


@pytest.mark.parametrize(("temperature", "top_k"), [(0.7, None), (1.3, 5)])
def test_the_sampler_records_the_log_prob_each_token_was_drawn_with(temperature, top_k):
    """vLLM's processed log-probs: the distribution after temperature and top-k, renormalised."""
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(SHIPPED_COLD_START)
    tokenizer = AutoTokenizer.from_pretrained(SHIPPED_COLD_START)
    prompt = tokenizer("<|user|>x = 3. What is x?<|assistant|>", add_special_tokens=False)["input_ids"]
    logprobs: list[list[float]] = []
    pick = global_sampler(temperature, 1.0, top_k, with_logprobs=True)
    rows = sample_tokens(
        model, [prompt, prompt], max_new_tokens=10, stop_ids={tokenizer.eos_token_id},
        pad_id=tokenizer.pad_token_id, pick=pick, logprobs=logprobs,
    )  # fmt: skip
    assert [len(values) for values in logprobs] == [len(ids) for ids in rows]
    for ids, recorded in zip(rows, logprobs, strict=True):
        with torch.no_grad():
            logits = model(torch.tensor([prompt + ids])).logits[0, len(prompt) - 1 : -1].float() / temperature
        if top_k:
            kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        expected = torch.log_softmax(logits, -1).gather(-1, torch.tensor(ids).unsqueeze(-1)).squeeze(-1)
        torch.testing.assert_close(torch.tensor(recorded), expected, atol=1e-4, rtol=1e-4)


def _trainer(tmp_path, temperature: float = 0.9, reward_funcs=None, rows: int = 6, levels=(1,), **options):
    from datasets import Dataset

    from recipes.common.model.loading import load_tokenizer
    from recipes.stages.grpo.config import RLVRGRPOConfig
    from recipes.stages.grpo.trainer import RLVRGRPOTrainer
    from tasks.synthetic import generate_rows

    def reward(completions, answer, **kwargs):
        return [float(i % 2) for i, _ in enumerate(answer)]  # every group has variance

    defaults = dict(
        num_generations=3, per_device_train_batch_size=3, gradient_accumulation_steps=1, steps_per_generation=1,
        max_completion_length=16, learning_rate=0.05, optim="sgd", loss_type="dapo", beta=0.0, max_steps=1, seed=3,
        report_to=[], use_cpu=True, bf16=False, gradient_checkpointing=False, save_strategy="no", logging_steps=1,
    )  # fmt: skip
    args = RLVRGRPOConfig(output_dir=str(tmp_path), temperature=temperature, **{**defaults, **options})
    model = AutoModelForCausalLM.from_pretrained(SHIPPED_COLD_START)
    return RLVRGRPOTrainer(
        model=model, reward_funcs=reward_funcs or [reward], args=args, train_dataset=Dataset.from_list(generate_rows(list(levels), rows, seed=0)),
        processing_class=load_tokenizer(str(SHIPPED_COLD_START)),
    )  # fmt: skip


def three_completions(trainer, temperature: float = 0.9):
    """One prompt's ids and three completions of it, padded, with their log-probs under the trainer's model:
    (prompt, prompt_ids, completion_ids, completion_mask, log-probs)."""
    tokenizer = trainer.processing_class
    prompt = tokenizer("<|user|>a = 2. What is a?<|assistant|>", add_special_tokens=False)["input_ids"]
    completions = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in ("2", "a is 2", "3 or so")]
    width = max(map(len, completions))
    completion_ids = torch.tensor([ids + [tokenizer.pad_token_id] * (width - len(ids)) for ids in completions])
    completion_mask = torch.tensor([[1] * len(ids) + [0] * (width - len(ids)) for ids in completions])
    prompt_ids = torch.tensor([prompt] * 3)
    with torch.no_grad():
        logits = trainer.model(torch.cat([prompt_ids, completion_ids], 1)).logits[:, len(prompt) - 1 : -1]
        logps = torch.log_softmax(logits.float() / temperature, -1)
    return (
        prompt,
        prompt_ids,
        completion_ids,
        completion_mask,
        logps.gather(-1, completion_ids.unsqueeze(-1)).squeeze(-1),
    )


def test_the_corrected_loss_and_gradient_equal_the_ones_worked_out_by_hand(tmp_path):
    trainer = _trainer(tmp_path)  # TRL's defaults: sequence_mask, clip_max 3
    trainer.current_gradient_accumulation_steps = 1
    model = trainer.model
    model.train()
    prompt, prompt_ids, completion_ids, completion_mask, policy = three_completions(trainer)
    # the sampler's log-probs: each sequence's ratio pi_old / pi_sampler made 2, 4 and 0.5 by its first token
    wanted = torch.tensor([2.0, 4.0, 0.5])
    sampling = policy.clone()
    sampling[:, 0] -= torch.log(wanted)
    advantages = torch.tensor([1.0, -0.5, 0.25])
    tokens = completion_mask.sum()
    inputs = {
        "prompt_ids": prompt_ids, "prompt_mask": torch.ones_like(prompt_ids), "completion_ids": completion_ids,
        "completion_mask": completion_mask, "advantages": advantages, "num_items_in_batch": tokens,
        "sampling_per_token_logps": sampling,
    }  # fmt: skip

    model.zero_grad()
    loss = trainer._compute_loss(model, inputs)
    loss.backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}

    corrected = torch.tensor([2.0, 0.0, 0.5])  # 4 > clip_max 3: sequence_mask leaves that sequence out
    torch.testing.assert_close(inputs["importance_sampling_ratio"].squeeze(-1), corrected, atol=1e-4, rtol=1e-4)
    # at the sampled policy the PPO ratio is 1 and nothing is clipped: per token -A * w, summed over real tokens
    expected = -(advantages * corrected * completion_mask.sum(-1)).sum() / tokens
    torch.testing.assert_close(loss.detach(), expected, atol=1e-5, rtol=1e-4)
    # its gradient: that of sum(-A * w * log pi(token)) / tokens, the log-probs computed afresh
    model.zero_grad()
    logits = model(torch.cat([prompt_ids, completion_ids], 1)).logits[:, len(prompt) - 1 : -1].float() / 0.9
    logps = torch.log_softmax(logits, -1).gather(-1, completion_ids.unsqueeze(-1)).squeeze(-1)
    (-(advantages.unsqueeze(1) * corrected.unsqueeze(1) * logps * completion_mask).sum() / tokens).backward()
    assert grads
    for name, p in model.named_parameters():
        if p.grad is not None:
            torch.testing.assert_close(grads[name], p.grad, atol=1e-5, rtol=1e-3, msg=name)
    assert trainer.use_vllm is False  # the flag TRL's loss reads is put back


def _logged(trainer) -> dict:
    trainer.train()
    return {key: value for entry in trainer.state.log_history for key, value in entry.items()}


def test_a_sampler_ten_percent_hotter_than_the_trainer_shows_in_the_metrics(tmp_path, monkeypatch):
    # a temperature at which the tiny model's tokens are not all near-certain, so that temperature shows
    same = _logged(_trainer(tmp_path / "same", temperature=2.0))
    assert same["sampling/sampling_logp_difference/mean"] < 1e-4
    assert same["sampling/importance_sampling_ratio/mean"] == pytest.approx(1.0, abs=1e-3)

    from recipes.stages.grpo.trainer import RLVRGRPOTrainer

    monkeypatch.setattr(
        RLVRGRPOTrainer, "_sampling_distribution", lambda self: (self.temperature * 1.1, self.top_p, self.top_k)
    )
    hotter = _logged(_trainer(tmp_path / "hotter", temperature=2.0, vllm_importance_sampling_mode="token_truncate"))
    assert hotter["sampling/sampling_logp_difference/mean"] > 0.01
    assert hotter["training/rollout_probs_diff_mean"] > 1e-3
    assert (
        hotter["sampling/importance_sampling_ratio/min"]
        < 0.99
        < 1.01
        < hotter["sampling/importance_sampling_ratio/max"]
    )


def test_on_trls_vllm_path_the_loss_pass_corrects_when_it_holds_pi_old(tmp_path, monkeypatch):
    """TRL's vLLM path computes pi_old at generation with a pass of its own; when one generation batch is one
    optimizer step that pass is the loss pass's, so generation is told not to correct and the loss pass does
    (the same ratio as on the transformers path); otherwise TRL's own ratio stands."""
    trainer = _trainer(tmp_path)
    trainer.current_gradient_accumulation_steps = 1
    trainer.model.train()
    trainer.use_vllm = True  # as TRL's vLLM path sets it (no engine is needed for what is checked here)
    from trl import GRPOTrainer

    seen = []  # what TRL's generation sees of the correction flag
    monkeypatch.setattr(GRPOTrainer, "_generate_and_score_completions",
                        lambda self, inputs: seen.append(self.vllm_importance_sampling_correction) or {})  # fmt: skip
    trainer.args.dynamic_sampling = False
    trainer._generate_and_score_completions([])
    assert seen == [False]  # TRL's generation: no pi_old pass
    assert trainer.vllm_importance_sampling_correction is True
    trainer.num_iterations = 2  # two loss passes a generation: pi_old is no longer the loss pass's own
    trainer._generate_and_score_completions([])
    assert seen == [False, True] and trainer.vllm_importance_sampling_correction is True
    trainer.num_iterations = 1

    tokenizer = trainer.processing_class
    prompt_ids = torch.tensor([tokenizer("<|user|>a = 2.<|assistant|>", add_special_tokens=False)["input_ids"]] * 2)
    completion_ids = torch.tensor([tokenizer(text, add_special_tokens=False)["input_ids"][:1] for text in "23"])
    with torch.no_grad():
        logits = trainer.model(torch.cat([prompt_ids, completion_ids], 1)).logits[:, -2:-1].float() / 0.9
        policy = torch.log_softmax(logits, -1).gather(-1, completion_ids.unsqueeze(-1)).squeeze(-1)

    def inputs(**extra):
        return {
            "prompt_ids": prompt_ids, "prompt_mask": torch.ones_like(prompt_ids), "completion_ids": completion_ids,
            "completion_mask": torch.ones_like(completion_ids), "advantages": torch.tensor([1.0, -1.0]),
            "num_items_in_batch": torch.tensor(2), "sampling_per_token_logps": policy - torch.log(
                torch.tensor([[2.0], [0.5]])
            ), **extra,
        }  # fmt: skip

    deferred = inputs()
    trainer._compute_loss(trainer.model, deferred)
    torch.testing.assert_close(
        deferred["importance_sampling_ratio"].squeeze(-1), torch.tensor([2.0, 0.5]), atol=1e-4, rtol=1e-4
    )
    assert trainer.use_vllm is True  # the vLLM path's flag is put back as it was
    given = torch.tensor([[1.0], [1.0]])
    corrected_at_generation = inputs(importance_sampling_ratio=given)
    trainer._compute_loss(trainer.model, corrected_at_generation)
    assert corrected_at_generation["importance_sampling_ratio"] is given  # TRL's ratio, not computed again
