"""bf16 autocast in the loss pass (`bf16: true`, accelerate's autocast on a CPU): the loss pass runs in bf16
while the weights stay fp32, and on a fixed batch its loss and gradient stay within the tolerance
docs/grpo.md states of the fp32 ones."""

from __future__ import annotations

import torch

from tests.test_sampler_correction import _trainer, three_completions

LOSS_RTOL = 3e-2  # the relative difference of the loss, bf16 autocast against fp32 (measured 0.15% with
# AVX512-BF16 kernels, 1.4% with ATEN_CPU_CAPABILITY=avx2)
GRAD_COSINE = 0.99  # the least cosine between the two gradients


def _fixed_batch(trainer) -> dict:
    """Three completions of one prompt, positive advantages (a loss that is no cancellation near 0, where a relative
    tolerance would mean nothing), and an older policy's log-probs 0.1 nats a token off, so that the ratio and
    through it the loss depend on the log-probs the pass computes."""
    _, prompt_ids, completion_ids, completion_mask, policy = three_completions(trainer)
    return {
        "prompt_ids": prompt_ids, "prompt_mask": torch.ones_like(prompt_ids), "completion_ids": completion_ids,
        "completion_mask": completion_mask, "advantages": torch.tensor([1.0, 0.5, 0.25]),
        "num_items_in_batch": completion_mask.sum(), "old_per_token_logps": policy - 0.1,
    }  # fmt: skip


def _loss_and_gradient(trainer, inputs, bf16: bool) -> tuple[float, torch.Tensor]:
    model = trainer.model
    model.train()
    model.zero_grad()
    trainer.current_gradient_accumulation_steps = 1
    context = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else torch.autocast("cpu", enabled=False)
    with context:
        loss = trainer._compute_loss(model, dict(inputs))
    loss.backward()
    return float(loss), torch.cat([p.grad.flatten().double() for p in model.parameters() if p.grad is not None])


def test_the_bf16_loss_and_gradient_stay_within_the_stated_tolerance_of_fp32(tmp_path):
    trainer = _trainer(tmp_path, vllm_importance_sampling_correction=False)
    inputs = _fixed_batch(trainer)
    loss32, grad32 = _loss_and_gradient(trainer, inputs, bf16=False)
    loss16, grad16 = _loss_and_gradient(trainer, inputs, bf16=True)
    assert loss32 != loss16  # bf16 did run
    assert abs(loss16 - loss32) <= LOSS_RTOL * abs(loss32)
    assert torch.nn.functional.cosine_similarity(grad32, grad16, dim=0) >= GRAD_COSINE
    assert 0.5 <= (grad16.norm() / grad32.norm()).item() <= 2.0


def test_bf16_true_runs_the_loss_pass_under_autocast_on_a_cpu_and_keeps_the_weights_fp32(tmp_path):
    trainer = _trainer(tmp_path, bf16=True)
    outputs = []
    layer = trainer.model.model.layers[0].mlp.down_proj
    handle = layer.register_forward_hook(lambda module, args, output: outputs.append(output.dtype))
    trainer.train()
    handle.remove()
    assert trainer.accelerator.mixed_precision == "bf16"
    assert torch.bfloat16 in outputs
    assert all(parameter.dtype == torch.float32 for parameter in trainer.model.parameters())


def test_the_loss_autocast_bench_prints_both_passes_side_by_side(capsys):
    from tests.test_bench_smoke import load

    bench = load("loss_autocast")
    assert bench.main(["--rows", "2", "--prompt", "8", "--completion", "8", "--repeats", "1"]) == 0
    printed = capsys.readouterr().out
    assert "| fp32 |" in printed and "| bf16 autocast |" in printed and "gradient cosine" in printed
    cosine = float(printed.rsplit("gradient cosine", 1)[1])
    assert 0.99 <= cosine <= 1.0 + 1e-9


def test_loss_dtype_sets_what_accelerate_runs_the_loss_pass_in(tmp_path, monkeypatch):
    import pytest

    from recipes.stages.grpo import sampling_dtype
    from recipes.stages.grpo.config import RLVRGRPOConfig

    def config(**options) -> RLVRGRPOConfig:
        return RLVRGRPOConfig(output_dir=str(tmp_path), report_to=[], **options)  # use_cpu unset, as in configs

    assert config(loss_dtype="bfloat16").bf16 is True
    assert config(loss_dtype="float32").bf16 is False
    monkeypatch.setattr(sampling_dtype, "bf16_speedup", lambda: 2.4)  # an AVX512-BF16 CPU
    assert config(loss_dtype="auto").bf16 is True
    monkeypatch.setattr(sampling_dtype, "bf16_speedup", lambda: 0.6)  # AVX2: bf16 emulated, slower
    assert config(loss_dtype="auto").bf16 is False
    assert config(loss_dtype="auto", bf16=True).bf16 is True  # an explicit bf16 wins
    with pytest.raises(ValueError, match="give one of them"):
        config(loss_dtype="float32", bf16=True)
    with pytest.raises(ValueError, match="loss_dtype must be one of"):
        config(loss_dtype="half")


def test_the_recipes_parser_leaves_the_precision_to_loss_dtype(tmp_path, monkeypatch):
    """On a machine without a GPU the recipes' parser sets bf16 false when the config does not choose; a config
    with loss_dtype has chosen, and its `auto` decides (it was pre-empted, and ran fp32, before)."""
    from recipes import grpo
    from recipes.common.command_line import config_defaults
    from recipes.common.command_line.config import parse_recipe_args
    from recipes.stages.grpo import sampling_dtype

    monkeypatch.setattr(config_defaults, "_accelerator_available", lambda: False)

    def bf16(speedup: float, *argv: str) -> bool:
        monkeypatch.setattr(sampling_dtype, "bf16_speedup", lambda: speedup)
        parsed = parse_recipe_args(
            grpo.make_parser().dataclass_types, "smollm2-135m/dapo_lora.yaml", ["--output_dir", str(tmp_path), *argv]
        )
        return parsed[1].bf16

    assert bf16(2.4, "--loss_dtype", "auto") is True and bf16(0.6, "--loss_dtype", "auto") is False
    assert bf16(2.4) is False  # the config's own: loss_dtype float32 (issue 60's measurement)
    assert bf16(2.4, "--loss_dtype", "float32") is False
    assert bf16(2.4, "--bf16", "false") is False  # an explicit bf16 wins
