"""The transformers sampling backend on the tiny model: n samples per prompt, token counts, finish
reasons, and samples that depend only on (seed, problem, sample index), never on the batching."""

from __future__ import annotations

import math
import sys
import types

import pytest
import torch

from eval.row_sampling import SeededRowSampling
from eval.sampler import SamplingParams, TransformersSampler, make_sampler, sample_seed

PROMPTS = [[{"role": "user", "content": "a=1 b=a. Find b."}], [{"role": "user", "content": "c=5. Find c."}], "raw text"]
KEYS = ["p1", "p2", "p3"]


@pytest.fixture(scope="module")
def sampler(tiny_model, tiny_tokenizer):
    return TransformersSampler(tiny_model, tiny_tokenizer, batch_size=8)


def test_n_samples_per_prompt_in_order_with_lengths_and_reasons(sampler, tiny_tokenizer):
    params = SamplingParams(n=3, temperature=1.0, max_new_tokens=12, seed=0)
    results = sampler.generate(PROMPTS, params, KEYS)
    assert [len(samples) for samples in results] == [3, 3, 3]
    for samples in results:
        for sample in samples:
            assert sample.finish_reason in ("stop", "length")
            assert 1 <= sample.num_tokens <= 12
            if sample.finish_reason == "length":
                assert sample.num_tokens == 12
            assert len(tiny_tokenizer(sample.text, add_special_tokens=False)["input_ids"]) <= sample.num_tokens


def test_samples_do_not_depend_on_batch_size_or_batch_company(tiny_model, tiny_tokenizer):
    params = SamplingParams(n=4, temperature=1.0, max_new_tokens=10, seed=1)
    alone = [
        TransformersSampler(tiny_model, tiny_tokenizer, batch_size=1).generate([p], params, [k])[0]
        for p, k in zip(PROMPTS, KEYS, strict=True)
    ]
    together = TransformersSampler(tiny_model, tiny_tokenizer, batch_size=64).generate(PROMPTS, params, KEYS)
    assert alone == together
    reordered = TransformersSampler(tiny_model, tiny_tokenizer, batch_size=5).generate(
        PROMPTS[::-1], params, KEYS[::-1]
    )
    assert reordered[::-1] == together


def test_seed_and_key_decide_the_samples(sampler):
    params = SamplingParams(n=4, temperature=1.0, max_new_tokens=10, seed=1)
    first = sampler.generate(PROMPTS[:2], params, KEYS[:2])
    assert first == sampler.generate(PROMPTS[:2], params, KEYS[:2])
    assert first != sampler.generate(
        PROMPTS[:2], SamplingParams(n=4, temperature=1.0, max_new_tokens=10, seed=2), KEYS[:2]
    )
    assert len({sample.text for sample in first[0]}) > 1  # the n samples of a problem differ from each other


def test_greedy_is_one_sample_repeated(sampler):
    results = sampler.generate(PROMPTS, SamplingParams(n=2, temperature=0.0, max_new_tokens=10), KEYS)
    assert all(samples[0] == samples[1] for samples in results)


def test_the_row_sampler_draws_from_the_filtered_distribution():
    """Frequencies of 20000 draws against the softmax of known logits, with top-k and top-p applied."""
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0, -3.0]])
    counts = torch.zeros(5)
    processor = SeededRowSampling([sample_seed(0, "x", 0)], temperature=1.0, top_p=1.0, top_k=None)
    for _ in range(20000):
        counts[processor(None, logits).argmax()] += 1
    expected = torch.softmax(logits[0], dim=-1)
    assert torch.allclose(counts / counts.sum(), expected, atol=0.012)  # > 3 standard deviations for each token

    top_k = SeededRowSampling([1], temperature=1.0, top_p=1.0, top_k=2)
    top_p = SeededRowSampling([2], temperature=1.0, top_p=0.6, top_k=None)  # 2.0 alone has p=0.64 >= 0.6
    assert {int(top_k(None, logits).argmax()) for _ in range(300)} == {0, 1}
    assert {int(top_p(None, logits).argmax()) for _ in range(300)} == {0}
    cold = SeededRowSampling([3], temperature=0.05, top_p=1.0, top_k=None)
    assert all(int(cold(None, logits).argmax()) == 0 for _ in range(200))
    assert math.isinf(float(top_k(None, logits)[0, 4]))


def test_stop_is_reported_when_eos_is_generated(sampler, tiny_tokenizer):
    eos = tiny_tokenizer.eos_token_id
    sample = sampler.to_sample([10, 11, eos, tiny_tokenizer.pad_token_id], {eos})
    assert sample.finish_reason == "stop" and sample.num_tokens == 3
    assert sampler.to_sample([10, 11, 12], {eos}).finish_reason == "length"


def test_vllm_backend_maps_parameters_and_outputs(monkeypatch, tiny_tokenizer):
    """vLLM needs a GPU; its glue is checked against a stand-in with vLLM's interface."""
    seen = {}

    class FakeLLM:
        def __init__(self, **kwargs):
            seen["init"] = kwargs

        def get_tokenizer(self):
            return tiny_tokenizer

        def generate(self, texts, requests, use_tqdm=True):
            seen["texts"], seen["requests"] = texts, requests
            completion = types.SimpleNamespace(text="\\boxed{1}", token_ids=[1, 2, 3], finish_reason="stop")
            truncated = types.SimpleNamespace(text="abc", token_ids=[4] * 7, finish_reason="length")
            return [types.SimpleNamespace(outputs=[completion, truncated]) for _ in texts]

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=FakeLLM, SamplingParams=lambda **kw: kw))
    sampler = make_sampler("vllm", "some/model", tensor_parallel_size=2)
    results = sampler.generate(
        PROMPTS[:2], SamplingParams(n=2, temperature=0.7, top_p=0.9, max_new_tokens=7, seed=3), ["a", "b"]
    )
    assert seen["init"]["model"] == "some/model" and seen["init"]["tensor_parallel_size"] == 2
    assert seen["texts"][0] == "<|user|>a=1 b=a. Find b.<|eos|><|assistant|>"
    first = seen["requests"][0]
    assert (first["n"], first["temperature"], first["top_p"], first["top_k"], first["max_tokens"]) == (
        2,
        0.7,
        0.9,
        -1,
        7,
    )
    assert first["seed"] == sample_seed(3, "a", 0) != seen["requests"][1]["seed"]
    assert [(s.num_tokens, s.finish_reason) for s in results[0]] == [(3, "stop"), (7, "length")]


@pytest.mark.parametrize(
    "kwargs", [{"n": 0}, {"temperature": -1.0}, {"top_p": 0.0}, {"top_p": 1.5}, {"max_new_tokens": 0}, {"top_k": -1}]
)
def test_bad_sampling_parameters_are_rejected(kwargs):
    with pytest.raises(ValueError):
        SamplingParams(**kwargs)


def test_close_frees_the_model():
    """Stages free a sampler's model with close() before loading the next model (recipes/rejection_sampling.py)."""
    from types import SimpleNamespace

    sampler = TransformersSampler(model=object(), tokenizer=SimpleNamespace(pad_token_id=0))
    sampler.close()
    assert sampler.model is None
    sampler.close()  # twice is harmless
