"""vLLM is the recipes' sampler where it is installed (on a GPU, and on a CPU, where its CPU build measured 2.2x
eval.decoding's tokens/s in fp32: scripts/bench/vllm_throughput.py); the transformers sampler where it is not. An
explicit choice always wins. Whether vLLM is installed is what `importlib.util.find_spec` says, stood in for here."""

from __future__ import annotations

import importlib.util

import pytest

from eval import sampler as sampler_module
from eval.sampler import resolve_backend
from eval.sampling_options import SamplingOptions
from recipes.common.config import parse_recipe_args
from recipes.stages.grpo.arguments import GRPOScriptArguments
from recipes.stages.grpo.config import RLVRGRPOConfig


@pytest.fixture(params=[True, False], ids=["vllm-installed", "no-vllm"])
def installed(request, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *rest: object() if name == "vllm" and request.param else (
            None if name == "vllm" else real(name, *rest)
        )
    )  # fmt: skip
    return request.param


def test_auto_is_vllm_where_it_is_installed_and_a_named_backend_stays(installed):
    assert resolve_backend("auto") == ("vllm" if installed else "transformers")
    assert resolve_backend("transformers") == "transformers" and resolve_backend("vllm") == "vllm"
    assert sampler_module.vllm_available() is installed


def test_sampling_options_default_to_auto():
    assert SamplingOptions().backend == "auto"


def grpo_config(*argv: str) -> RLVRGRPOConfig:
    from trl import ModelConfig

    parsed = parse_recipe_args((GRPOScriptArguments, RLVRGRPOConfig, ModelConfig), "demo/dapo.yaml", list(argv))
    return parsed[1]


def test_grpo_generates_with_vllm_where_it_is_installed_unless_told(installed, tmp_path):
    out = ["--output_dir", str(tmp_path)]
    assert grpo_config(*out).use_vllm is installed
    assert grpo_config(*out, "--use_vllm", "false").use_vllm is False
    assert grpo_config(*out, "--use_vllm", "true").use_vllm is True
    assert grpo_config(*out, "--use_vllm", "--max_steps", "3").use_vllm is True  # a bare switch, as TRL's bools


def test_a_config_that_asks_for_the_rollout_worker_keeps_compact_generation_where_vllm_is_installed(
    installed, tmp_path
):
    """A config asking for the rollout worker (max_staleness: 1; it samples as compact generation does) must not
    turn into a vLLM run that the worker cannot serve when use_vllm is unset; an explicit choice still wins (and
    the trainer refuses it, with the reason). The SmolLM2 configs take turns (max_staleness: 0): vLLM where
    installed."""
    from trl import ModelConfig

    def config(*argv: str) -> RLVRGRPOConfig:
        yaml = "smollm2-135m/dapo_lora.yaml"
        return parse_recipe_args((GRPOScriptArguments, RLVRGRPOConfig, ModelConfig), yaml, list(argv))[1]

    out = ["--output_dir", str(tmp_path)]
    assert config(*out).max_staleness == 0 and config(*out).use_vllm is installed
    assert config(*out, "--max_staleness", "1").use_vllm is False
    assert config(*out, "--partial_rollout_tokens", "96").use_vllm is False  # partial rollouts: compact's too
    assert config(*out, "--use_vllm", "true").use_vllm is True
    assert grpo_config(*out, "--rollout_worker", "true").use_vllm is False
