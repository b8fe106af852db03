"""bf16 sampling (recipes.stages.grpo.sampling_dtype): the weights that train stay fp32 bit for bit, `auto`
follows this machine's measured bf16 speed, and a run that samples in bf16 shows the cost in its mismatch metrics."""

from __future__ import annotations

import pytest
import torch

from recipes.stages.grpo import sampling_dtype
from recipes.stages.grpo.sampling_dtype import bf16_speedup, cast_for_sampling, resolve_sampling_dtype
from tests.test_sampler_correction import _logged, _trainer


def test_the_model_samples_in_bf16_and_trains_in_its_own_fp32_tensors():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(5, 4), torch.nn.Linear(4, 5))
    model[1].weight = model[0].weight  # tied, as an LM head to its embedding
    model.register_buffer("inv_freq", torch.arange(3, dtype=torch.float32))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    before = {name: (param, param.data_ptr(), param.data.clone()) for name, param in model.named_parameters()}
    with cast_for_sampling(model, torch.bfloat16) as sampling:
        assert sampling is model and all(param.dtype == torch.bfloat16 for param in model.parameters())
        assert model.inv_freq.dtype == torch.float32  # buffers (rotary frequencies) are left as they are
        assert model[1].weight is model[0].weight
    for name, param in model.named_parameters():
        same, address, copy = before[name]
        assert param is same and param.data_ptr() == address and torch.equal(param.data, copy)  # the fp32 tensor
    assert optimizer.param_groups[0]["params"][0] is before["0.weight"][0]
    with cast_for_sampling(model, torch.float32) as unchanged:
        assert unchanged[0].weight.dtype == torch.float32 and unchanged[0].weight.data_ptr() == before["0.weight"][1]


def test_auto_follows_the_measured_speedup_and_sharded_runs_stay_fp32(monkeypatch, tmp_path):
    for speedup, expected in ((2.0, torch.bfloat16), (1.1, torch.float32)):
        monkeypatch.setattr(sampling_dtype, "bf16_speedup", lambda speedup=speedup: speedup)
        assert resolve_sampling_dtype("auto", sharded=False) == expected
        assert resolve_sampling_dtype("auto", sharded=True) == torch.float32
    assert resolve_sampling_dtype("float32", sharded=False) == torch.float32
    assert resolve_sampling_dtype("bfloat16", sharded=False) == torch.bfloat16
    with pytest.raises(ValueError, match="cannot swap DeepSpeed's or FSDP's sharded parameters"):
        resolve_sampling_dtype("bfloat16", sharded=True)
    with pytest.raises(ValueError, match="sampling_dtype must be one of"):
        resolve_sampling_dtype("fp16", sharded=False)


def test_the_speedup_is_measured_once_per_machine(monkeypatch, tmp_path):
    calls, measure = [], sampling_dtype._measure_speedup
    monkeypatch.setattr(sampling_dtype, "_measure_speedup", lambda: calls.append(1) or 1.7)
    assert bf16_speedup(directory=tmp_path) == 1.7 and bf16_speedup(directory=tmp_path) == 1.7
    assert len(calls) == 1 and (tmp_path / sampling_dtype.CACHE_FILE).is_file()
    assert bf16_speedup(refresh=True, directory=tmp_path) == 1.7 and len(calls) == 2
    assert measure(repeats=1) > 0  # the real measurement runs


def test_a_bf16_sampler_shows_its_cost_in_the_mismatch_and_trains_fp32_weights(tmp_path):
    same = _logged(_trainer(tmp_path / "fp32", temperature=2.0))
    trainer = _trainer(tmp_path / "bf16", temperature=2.0, sampling_dtype="bfloat16")
    assert trainer.sampling_dtype == torch.bfloat16
    bf16 = _logged(trainer)
    assert same["sampling/sampling_logp_difference/mean"] < 1e-4  # the fp32 sampler is the policy
    assert bf16["sampling/sampling_logp_difference/mean"] > 1e-3  # the bf16 one is not, and it shows
    assert all(param.dtype == torch.float32 for param in trainer.model.parameters())
