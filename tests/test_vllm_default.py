"""vLLM is the recipes' sampler where it is installed (on a GPU, and on a CPU, where its CPU build measured 2.2x
eval.decoding's tokens/s in fp32: scripts/bench/vllm_throughput.py); the transformers sampler where it is not. An
explicit choice always wins. Whether vLLM is installed is what `importlib.util.find_spec` says, stood in for here."""

from __future__ import annotations

import importlib
import importlib.util

import pytest

from eval import sampler as sampler_module
from eval.sampler import resolve_backend
from eval.sampling_options import SamplingOptions
from recipes.common.command_line.checks import ConfigError
from recipes.common.command_line.config import parse_recipe_args
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
    if not installed:  # asked for by name where it is not installed: one line with the fix (issue 57)
        for switch in (["--use_vllm", "true"], ["--use_vllm", "--max_steps", "3"]):
            with pytest.raises(ConfigError, match=r"use_vllm: true asks for vLLM.*make setup-vllm.*--use_vllm false"):
                grpo_config(*out, *switch)
        return
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
    if installed:
        assert config(*out, "--use_vllm", "true").use_vllm is True
    assert grpo_config(*out, "--rollout_worker", "true").use_vllm is False


RECIPES_THAT_SAMPLE = [
    ("grpo", ["--use_vllm", "true"], "use_vllm: true", "--use_vllm false"),
    ("rejection_sampling", ["--sampling", "{backend: vllm}"], "sampling: {backend: vllm}", "backend: transformers"),
    ("distill", ["--sampling", "{backend: vllm}"], "sampling: {backend: vllm}", "backend: transformers"),
    ("reward_model", ["--sampling", "{backend: vllm}"], "sampling: {backend: vllm}", "backend: transformers"),
]


@pytest.fixture
def no_vllm(monkeypatch):
    """vLLM not installed, whatever this environment has: what `find_spec` says is all the check reads. (And no
    logging handler set up on this test's captured stderr, which later tests of the worker would write to.)"""
    from recipes.common.command_line import config

    monkeypatch.setattr(config, "setup_logging", lambda: None)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *rest: None if name == "vllm" else real(name, *rest))


@pytest.mark.parametrize("recipe, flags, asked, instead", RECIPES_THAT_SAMPLE, ids=[r[0] for r in RECIPES_THAT_SAMPLE])
def test_vllm_named_where_it_is_not_installed_is_one_line_and_exit_2(
    recipe, flags, asked, instead, no_vllm, tmp_path, capsys
):
    """Issue 57: at b6ef81d `--use_vllm true` without vLLM ended in TRL's AttributeError (no attribute 'LLM'), and
    `--backend vllm` in a traceback. Each recipe that samples, and the evaluator, now say what to do."""
    module = importlib.import_module(f"recipes.{recipe}")
    with pytest.raises(SystemExit) as stop:
        module.make_parser().run(module.main, [*flags, "--output_dir", str(tmp_path / "out")])
    assert stop.value.code == 2
    message = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(message) == 1 and asked in message[0] and "make setup-vllm" in message[0] and instead in message[0]
    assert not (tmp_path / "out").exists()  # refused before anything loads or is written


def test_the_evaluator_refuses_backend_vllm_where_it_is_not_installed(no_vllm, tmp_path, capsys):
    from eval import evaluate

    model = tmp_path / "no-such-model"  # refused before the model is looked for
    with pytest.raises(SystemExit) as stop:
        evaluate.main(
            ["--model", str(model), "--dataset", "x.jsonl", "--backend", "vllm", "--output-dir", str(tmp_path)]
        )
    assert stop.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert error[-1].startswith("error: --backend vllm asks for vLLM") and "--backend transformers" in error[-1]
