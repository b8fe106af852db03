"""Asynchronous generation (recipes.stages.grpo.async_rollouts, rollout_worker): the worker at staleness 0 is the
synchronous run bit for bit; a request samples with the weights pushed last before it, whatever the trainer
pushes after; staleness 1 trains each batch one step after the weights that sampled it, and the mismatch shows."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from recipes.common.model.loading import SHIPPED_COLD_START
from recipes.stages.grpo.async_rollouts import AsyncRollouts
from recipes.stages.grpo.compact_generation import merged_lora
from recipes.stages.grpo.rollout_worker import Request, RolloutWorker, plain_parameters
from tests.test_cheaper_step import lora_model
from tests.test_sampler_correction import _logged, _trainer

PROMPT = [5, 17, 23, 42, 7, 9]


def _request(prompt_ids, temperature=1.5, seed=0) -> Request:
    limits = {"max_new_tokens": 8, "stop_ids": {0}, "pad_id": 0}
    return Request(number=-1, prompt_ids=prompt_ids, limits=limits, distribution=(temperature, 1.0, None), seed=seed)


def _sequence_logps(model, prompt, completion, temperature) -> torch.Tensor:
    """Each completion token's log-prob under `model` at `temperature`, by a plain forward pass."""
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1 : -1].float() / temperature
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(completion).unsqueeze(-1)).squeeze(-1)


def test_a_request_samples_with_the_weights_pushed_last_before_it():
    first = AutoModelForCausalLM.from_pretrained(SHIPPED_COLD_START).eval()
    second = AutoModelForCausalLM.from_pretrained(SHIPPED_COLD_START).eval()
    with torch.no_grad():
        for parameter in second.parameters():
            parameter.mul_(1.5)  # another policy: its log-probs differ on every token
    worker = RolloutWorker(first)
    try:
        worker.push(first, version=0)
        early = worker.submit(_request([PROMPT] * 3))
        worker.push(second, version=1)  # pushed while the early request may still be sampling
        late = worker.submit(_request([PROMPT] * 3, seed=1))
        results = worker.result(late), worker.result(early)  # taken out of order
    finally:
        worker.close()
    assert not worker.alive()
    for result, version, model, other in ((results[1], 0, first, second), (results[0], 1, second, first)):
        assert result.error is None and result.version == version
        for completion, logprobs in zip(result.completion_ids, result.logprobs, strict=True):
            assert len(completion) == len(logprobs) > 0
            own = _sequence_logps(model, PROMPT, completion, 1.5)
            assert torch.allclose(torch.tensor(logprobs), own, atol=1e-4)  # the policy that sampled it
            assert not torch.allclose(
                torch.tensor(logprobs), _sequence_logps(other, PROMPT, completion, 1.5), atol=1e-2
            )


def test_the_worker_holds_the_merged_lora_policy_under_the_plain_models_names():
    model = lora_model().eval()
    plain = AutoModelForCausalLM.from_pretrained(SHIPPED_COLD_START)
    with merged_lora(model) as merged:
        named = plain_parameters(merged)
        assert set(named) == {name for name, _ in plain.named_parameters()}
        adapted = next(name for name in named if name.endswith("q_proj.weight"))
        assert not torch.equal(named[adapted], dict(plain.named_parameters())[adapted])  # the adapter is in it
        with torch.no_grad():
            expected = merged(torch.tensor([PROMPT])).logits
        for name, parameter in plain.named_parameters():
            parameter.data.copy_(named[name])
    with torch.no_grad():
        assert torch.allclose(plain(torch.tensor([PROMPT])).logits, expected, atol=1e-5)


def test_a_dead_worker_answers_with_an_error_not_a_hang():
    worker = RolloutWorker(AutoModelForCausalLM.from_pretrained(SHIPPED_COLD_START))
    worker.process.kill()
    worker.process.join()
    result = worker.result(worker.submit(_request([PROMPT])))
    assert result.error and "died" in result.error
    worker.close()


def test_staleness_0_in_the_worker_is_the_synchronous_run_bit_for_bit(tmp_path):
    runs = {}
    for name, options in (("sync", {}), ("worker", {"rollout_worker": True})):
        trainer = _trainer(
            tmp_path / name, temperature=2.0, max_steps=3, learning_rate=5.0, dynamic_sampling=True, **options
        )
        runs[name] = (trainer, _logged(trainer), [dict(entry) for entry in trainer.state.log_history])
    (sync, _, sync_log), (worker, logged, worker_log) = runs["sync"], runs["worker"]
    assert worker.async_rollouts is not None and logged["async/staleness"] == 0.0
    assert worker.async_rollouts.worker is None  # closed
    for name, parameter in sync.model.named_parameters():
        assert torch.equal(parameter, dict(worker.model.named_parameters())[name]), name
    for before, after in zip(sync_log[:-1], worker_log[:-1], strict=True):  # the last entry: runtimes
        for key in ("loss", "reward", "entropy", "sampling/sampling_logp_difference/mean", "completions/mean_length"):
            assert before[key] == after[key], key


def test_staleness_1_trains_each_batch_a_step_after_its_weights_and_the_mismatch_shows(tmp_path):
    trainer = _trainer(
        tmp_path / "async",
        temperature=2.0,
        max_steps=3,
        learning_rate=0.2,
        max_staleness=1,
        dynamic_sampling=True,
        vllm_importance_sampling_mode="token_truncate",
    )  # DAPO's dynamic sampling: its rounds are where the step's batch is generated
    trainer.train()
    steps = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert [entry["async/staleness"] for entry in steps] == [0.0, 1.0, 1.0]
    for entry in steps:
        assert 0.0 <= entry["async/trainer_idle_ratio"] <= 1.0 and 0.0 <= entry["async/rollouter_idle_ratio"] <= 1.0
        assert entry["timing_s/update_weights"] > 0.0
    # step 0 samples with the weights that train; steps 1 and 2 with the step before's, and it shows

    assert steps[0]["sampling/sampling_logp_difference/mean"] < 1e-5
    assert min(entry["sampling/sampling_logp_difference/mean"] for entry in steps[1:]) > 1e-3


def test_the_next_steps_extra_round_is_sampled_ahead_and_taken_when_the_stream_reaches_it(tmp_path):
    def accuracy(completions, **kwargs):
        return [0.0] * len(completions)  # every group all wrong: dynamic sampling draws an extra round each step

    trainer = _trainer(
        tmp_path, temperature=2.0, reward_funcs=[accuracy], rows=500, max_steps=4, max_staleness=1, dynamic_sampling=True,
        dynamic_sampling_max_rounds=1, variance_rewards=["accuracy"], accuracy_reward="accuracy",
    )  # fmt: skip
    trainer.train()
    steps = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert [entry["dynamic_sampling/extra_rounds"] for entry in steps] == [1.0] * 4
    # step 0: its batch from the worker, its extra round sampled in the trainer (nothing was asked ahead yet);
    # later steps: both from the worker, each sampled while the step before trained
    assert [entry["async/worker_rounds"] for entry in steps] == [1.0, 2.0, 2.0, 2.0]
    assert [entry["async/staleness"] for entry in steps] == [0.0, 1.0, 1.0, 1.0]
    assert trainer.extra_prompts.draws == 4 * 1  # one extra round of one group a step, drawn from the stream in order


@pytest.mark.parametrize("staleness", [1, 2])
def test_reading_ahead_keeps_the_dataloaders_order_and_reads_staleness_steps_ahead(staleness):
    reader = AsyncRollouts(staleness, weight_sync_steps=1, accumulation_steps=2, seed=0)
    iterator = iter(range(9))
    steps = [reader.batch_samples(iterator, 2) for _ in range(5)]
    assert steps == [[0, 1], [2, 3], [4, 5], [6, 7], [8]]  # the epoch's last step is short, as without reading ahead
    reader = AsyncRollouts(staleness, weight_sync_steps=1, accumulation_steps=2, seed=0)
    iterator = iter(range(9))
    reader.batch_samples(iterator, 2)
    assert list(reader.ahead) == list(range(2, 2 + 2 * staleness))
    other_epoch = iter(range(100, 104))
    assert reader.batch_samples(other_epoch, 2) == [100, 101]  # a new epoch starts afresh


def test_options_that_the_worker_cannot_serve_are_refused_with_the_reason(tmp_path):
    from recipes.stages.grpo.config import RLVRGRPOConfig

    with pytest.raises(ValueError, match="max_staleness must be >= 0"):
        RLVRGRPOConfig(output_dir=str(tmp_path), max_staleness=-1, use_cpu=True, report_to=[])
    with pytest.raises(ValueError, match="needs the rollout worker"):
        _trainer(tmp_path / "a", max_staleness=1, rollout_worker=False)
    with pytest.raises(ValueError, match="compact_generation true"):
        _trainer(tmp_path / "b", max_staleness=1, compact_generation=False)
    with pytest.raises(ValueError, match="one generation batch must be one optimizer step"):
        _trainer(tmp_path / "c", max_staleness=1, steps_per_generation=2, per_device_train_batch_size=3)


def test_the_staleness_bench_trains_both_arms_from_one_cold_start_and_pairs_them(tmp_path, monkeypatch):
    import json

    from tests.test_bench_smoke import load

    bench = load("staleness")
    monkeypatch.chdir(tmp_path.parent)
    assert bench.main(["--fast", "--seeds", "0", "--output-dir", tmp_path.name]) == 0  # a relative folder, too
    report = (tmp_path / "report.md").read_text()
    assert "| 0 | 0 |" in report and "| 0 | 1 |" in report and "pooled over seeds" in report
    for staleness in (0, 1):
        run = tmp_path / f"staleness{staleness}" / "seed0" / "dapo"
        card = json.loads((run / "run_card.json").read_text())
        assert card["config"]["training"]["max_staleness"] == staleness
        logged = [json.loads(line) for line in (run / "metrics.jsonl").open()]
        assert any("async/staleness" in entry for entry in logged) == (staleness == 1)
    # an arm with flags of its own, against the same reference runs (reused, not trained again)
    reference = (tmp_path / "staleness0" / "seed0" / "dapo" / "run_card.json").stat().st_mtime
    flags = ["--staleness", "0", "0", "--flags", "--sampling_dtype bfloat16", "--tag", "bf16"]
    assert bench.main(["--fast", "--seeds", "0", "--output-dir", tmp_path.name, *flags]) == 0
    assert (tmp_path / "staleness0" / "seed0" / "dapo" / "run_card.json").stat().st_mtime == reference
    card = json.loads((tmp_path / "staleness0-bf16" / "seed0" / "dapo" / "run_card.json").read_text())
    assert card["config"]["training"]["sampling_dtype"] == "bfloat16"
    assert "| 0 bf16 |" in (tmp_path / "report-bf16.md").read_text()
    with pytest.raises(SystemExit):
        bench.main(["--fast", "--output-dir", tmp_path.name, "--flags", "--sampling_dtype bfloat16"])  # no --tag


def test_a_stale_run_is_warned_of_what_its_correction_cost_in_the_measurements():
    from types import SimpleNamespace

    from recipes.stages.grpo.async_rollouts import staleness_warnings

    def run(staleness, correction=True, mode="sequence_mask"):
        return staleness_warnings(
            SimpleNamespace(
                max_staleness=staleness,
                vllm_importance_sampling_correction=correction,
                vllm_importance_sampling_mode=mode,
            )  # fmt: skip
        )

    assert run(0, correction=False) == [] and run(0, mode="token_truncate") == []
    (truncated,) = run(1, mode="token_truncate")  # the best correction measured still costs: said with its figures
    assert "trades accuracy" in truncated and "-0.058" in truncated and "SmolLM2" in truncated
    assert "collapsed" in run(1, correction=False)[0]
    assert "token_truncate lost less" in run(2)[0]
