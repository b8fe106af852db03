"""The transformers sampling backend on the tiny model: n samples per prompt, token counts, finish reasons, seeds."""

from __future__ import annotations

import pytest

from eval.sampler import SamplingParams, TransformersSampler


@pytest.fixture(scope="module")
def sampler(tiny_model, tiny_tokenizer):
    return TransformersSampler(tiny_model, tiny_tokenizer, batch_size=8)


PROMPTS = [[{"role": "user", "content": "a=1 b=a. Find b."}], [{"role": "user", "content": "c=5. Find c."}], "raw text"]


def test_n_samples_per_prompt_in_order_with_lengths_and_reasons(sampler, tiny_tokenizer):
    params = SamplingParams(n=3, temperature=1.0, max_new_tokens=12, seed=0)
    results = sampler.generate(PROMPTS, params)
    assert [len(samples) for samples in results] == [3, 3, 3]
    for samples in results:
        for sample in samples:
            assert sample.finish_reason in ("stop", "length")
            assert 1 <= sample.num_tokens <= 12
            if sample.finish_reason == "length":
                assert sample.num_tokens == 12
            # the decoded text re-encodes to at most the generated tokens (EOS is not part of the text)
            assert len(tiny_tokenizer(sample.text, add_special_tokens=False)["input_ids"]) <= sample.num_tokens


def test_same_seed_same_samples_and_other_seed_differs(sampler):
    params = SamplingParams(n=4, temperature=1.0, max_new_tokens=10, seed=1)
    first = sampler.generate(PROMPTS[:2], params)
    assert first == sampler.generate(PROMPTS[:2], params)
    other = sampler.generate(PROMPTS[:2], SamplingParams(n=4, temperature=1.0, max_new_tokens=10, seed=2))
    assert other != first


def test_batching_does_not_change_greedy_results(tiny_model, tiny_tokenizer):
    params = SamplingParams(n=2, temperature=0.0, max_new_tokens=10)
    one_by_one = TransformersSampler(tiny_model, tiny_tokenizer, batch_size=1).generate(PROMPTS, params)
    batched = TransformersSampler(tiny_model, tiny_tokenizer, batch_size=64).generate(PROMPTS, params)
    assert one_by_one == batched
    assert all(samples[0] == samples[1] for samples in batched)


def test_stop_is_reported_when_eos_is_generated(tiny_model, tiny_tokenizer):
    sampler = TransformersSampler(tiny_model, tiny_tokenizer)
    eos = tiny_tokenizer.eos_token_id
    sample = sampler._to_sample([10, 11, eos, tiny_tokenizer.pad_token_id], {eos})
    assert sample.finish_reason == "stop" and sample.num_tokens == 3
    assert sampler._to_sample([10, 11, 12], {eos}).finish_reason == "length"


@pytest.mark.parametrize(
    "kwargs", [{"n": 0}, {"temperature": -1.0}, {"top_p": 0.0}, {"top_p": 1.5}, {"max_new_tokens": 0}]
)
def test_bad_sampling_parameters_are_rejected(kwargs):
    with pytest.raises(ValueError):
        SamplingParams(**kwargs)
