"""`make test-vllm`: GRPO's server mode on a CPU build of vLLM, the topology of a multi-node run on one machine.

One vLLM server process (scripts/launch/vllm_serve.py, as a user starts it; conftest.py, one for the session, which
test_vllm_tools.py shares) serves the tiny cold start on localhost; against it:
- the weight push reaches the served model: pushed weights change its greedy answers to the pushed model's, and
  pushing the old ones back restores them (the log-probs it returns equal a transformers model's with those
  weights, within the bf16 engine's rounding);
- recipes/grpo.py with `use_vllm: true, vllm_mode: server` trains 4 steps of DAPO with dynamic sampling, the
  monitor, gold rewards and step timing on; each step logs `timing_s/update_weights` and TRL's sampling-mismatch
  metrics, and the run card sums the pushes;
- two trainer processes (accelerate, gloo) and the one server train 2 steps together, as the training nodes of
  scripts/launch/commands.py do with their vLLM node.
The push on a CPU goes by a safetensors file and the server's reload (recipes.stages.grpo.vllm_cpu); a GPU
user's server takes TRL's NCCL push instead, which needs CUDA.
"""

from __future__ import annotations

import json
import statistics
import types

import pytest
import torch
import yaml

from tests.conftest import REPO
from tests.vllm_cpu.conftest import MODEL, SERVER_START_S, free_port  # noqa: F401  (test_launch_lines imports them)
from tests.vllm_cpu.test_vllm_cpu import run

pytestmark = pytest.mark.vllm
CONFIG = "recipes/configs/demo/dapo.yaml"  # DAPO with dynamic sampling, as the demo runs it


def test_pushed_weights_reach_the_served_model(server):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl.generation.vllm_client import VLLMClient

    from recipes.stages.grpo.vllm_cpu import push_to_server

    client = VLLMClient(base_url=server, connection_timeout=60)
    tokenizer = AutoTokenizer.from_pretrained(REPO / MODEL)
    prompts = [tokenizer(text)["input_ids"] for text in ("What is 3 + 4?", "Compute 12 - 5.")]
    original = AutoModelForCausalLM.from_pretrained(REPO / MODEL, dtype=torch.float32)
    changed = AutoModelForCausalLM.from_pretrained(REPO / MODEL, dtype=torch.float32)
    with torch.no_grad():  # other layers' outputs, and a new embedding (the tied head must be packed again)
        for name, param in changed.named_parameters():
            if "o_proj" in name or "down_proj" in name or "embed_tokens" in name:
                param.mul_(-1.0 if "proj" in name else 1.5)

    def push(model):
        pushing = types.SimpleNamespace(
            accelerator=types.SimpleNamespace(is_main_process=True),
            vllm_client=client,
            _iter_named_params=lambda: ((name, param.data) for name, param in model.named_parameters()),
        )
        push_to_server(pushing)
        served = client.generate(prompts=prompts, temperature=0.0, max_tokens=12, logprobs=0)
        return served["completion_ids"], served["logprobs"]

    def distance(model, ids, logprobs) -> float:
        """Mean |served log-prob - the model's| over the served tokens."""
        gaps = []
        for prompt, completion, served in zip(prompts, ids, logprobs, strict=True):
            with torch.no_grad():
                logits = model(torch.tensor([prompt + completion])).logits[0, len(prompt) - 1 : -1]
            own = torch.log_softmax(logits.float(), -1)[torch.arange(len(completion)), completion]
            gaps += [abs(a - (b[0] if isinstance(b, list) else b)) for a, b in zip(own.tolist(), served, strict=True)]
        return statistics.mean(gaps)

    before = push(original)
    after = push(changed)
    again = push(original)
    assert after[0] != before[0] and again[0] == before[0]
    assert distance(changed, *after) < 0.05 < 1.0 < distance(original, *after)
    assert distance(original, *again) < 0.05 < 1.0 < distance(changed, *again)


def metrics_steps(out) -> list[dict]:
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [line for line in lines if "timing_s/step" in line]


def test_grpo_server_mode_trains_dapo_with_every_addition_on(server, tmp_path):
    out = tmp_path / "grpo"
    run(
        "recipes/grpo.py", "--config", CONFIG, "--model_name_or_path", MODEL,
        "--use_vllm", "true", "--vllm_mode", "server", "--vllm_server_base_url", server, "--max_steps", "4",
        "--logging_steps", "1", "--gold_rewards", "[{name: math_accuracy}]", "--output_dir", str(out),
        "--disable_tqdm", "true",
    )  # fmt: skip
    steps = metrics_steps(out)
    assert len(steps) == 4
    for line in steps:
        assert line["timing_s/update_weights"] > 0  # the policy was pushed to the server before it generated
        assert line["timing_s/generate"] > 0 and line["dynamic_sampling/groups_generated"] >= 8
        assert 0 <= line["sampling/sampling_logp_difference/mean"] < 0.1  # bf16 server against the fp32 trainer
        assert 0 < line["sampling/importance_sampling_ratio/mean"] < 2
        assert "gold/math_accuracy" in line and "groups/std_mean" in line
        assert line["timing_s/logprobs"] == 0  # no pi_old pass: the loss pass corrects (sampler_correction.py)
    card = json.loads((out / "run_card.json").read_text())
    assert card["timing"]["seconds_total"]["update_weights"] == pytest.approx(
        sum(line["timing_s/update_weights"] for line in steps), rel=1e-6
    )


def test_two_trainer_processes_and_one_vllm_server_train_together(server, tmp_path):
    out = tmp_path / "two"
    run(
        "-m", "accelerate.commands.launch", "--config_file", "recipes/accelerate/multi_cpu.yaml",
        "--main_process_port", "0", "recipes/grpo.py", "--config", CONFIG,
        "--model_name_or_path", MODEL, "--use_vllm", "true", "--vllm_mode", "server", "--vllm_server_base_url",
        server, "--max_steps", "2", "--logging_steps", "1", "--output_dir", str(out), "--disable_tqdm", "true",
    )  # fmt: skip
    card = json.loads((out / "run_card.json").read_text())
    assert card["processes"] == 2 and card["final_step"] == 2
    steps = metrics_steps(out)
    assert len(steps) == 2 and all(line["timing_s/update_weights"] > 0 for line in steps)
    config = yaml.safe_load((REPO / CONFIG).read_text())
    groups = 2 * config["per_device_train_batch_size"] // config["num_generations"]  # 8 prompts a process: 16
    for line in steps:
        rounds, kept = line["dynamic_sampling/extra_rounds"], line["dynamic_sampling/groups_kept_with_variance"]
        # both processes' prompts were generated by the one server: every round, 8 groups per process
        assert line["dynamic_sampling/groups_generated"] == groups * (1 + rounds)
        # 16 groups with variance reached the loss, 8 per process, unless the rounds ran out first: the server's
        # samples differ from one CPU's kernels to another's, so whether the cap is reached is chance
        assert kept == groups or (rounds == config["dynamic_sampling_max_rounds"] and kept < groups)
