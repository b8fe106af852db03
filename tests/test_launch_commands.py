"""scripts/launch/commands.py (issue 35, item 4): the commands of a multi-node run, as each node must run them;
scripts/launch/vllm_serve.py: the vLLM node's server, on a GPU or a CPU build."""

from __future__ import annotations

import subprocess
import sys

import pytest

from scripts.launch.commands import commands, parse_args
from scripts.launch.vllm_serve import serve_argv
from tests.conftest import REPO


def parse(*argv: str):
    return parse_args(list(argv))


def test_server_mode_one_vllm_node_and_every_training_node():
    args = parse(
        "--config", "recipes/configs/qwen2.5-7b/dapo.yaml", "--nodes", "4", "--gpus-per-node", "8",
        "--main-ip", "10.0.0.1", "--vllm-mode", "server", "--vllm-host", "10.0.0.9",
    )  # fmt: skip
    lines = commands(args)
    assert len(lines) == 5 and lines[0][0] == "vllm node 10.0.0.9"
    serve = lines[0][1]
    assert serve.startswith("python scripts/launch/vllm_serve.py Qwen/Qwen2.5-7B ")  # the config's own model
    assert "--tensor-parallel-size 8" in serve and "--port 8000" in serve
    for rank, (where, command) in enumerate(lines[1:]):
        assert where.startswith(f"training node {rank}")
        assert f"--num_machines 4 --num_processes 32 --machine_rank {rank} --main_process_ip 10.0.0.1" in command
        assert command.endswith("--vllm_mode server --vllm_server_host 10.0.0.9 --vllm_server_port 8000")
        assert "--config_file recipes/accelerate/zero3.yaml" in command


def test_colocate_mode_has_no_vllm_node_and_one_node_can_be_asked_for():
    args = parse("--config", "recipes/configs/qwen2.5-math-1.5b/dapo.yaml", "--nodes", "2", "--node-rank", "1")
    ((where, command),) = commands(args)
    assert where == "training node 1" and "--machine_rank 1" in command and "vllm" not in command


def test_server_mode_without_its_host_is_refused():
    result = subprocess.run(
        [sys.executable, "scripts/launch/commands.py", "--config", "recipes/configs/qwen2.5-7b/dapo.yaml",
         "--vllm-mode", "server"], cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode != 0 and "needs --vllm-host" in result.stderr


@pytest.mark.parametrize("script", ["scripts/launch/train.slurm"])
def test_the_slurm_script_is_valid_bash(script):
    assert subprocess.run(["bash", "-n", str(REPO / script)], check=False).returncode == 0


def test_the_server_gets_what_trl_needs_and_a_cpu_build_what_it_needs_beside():
    """On a GPU, what TRL 1.16's `trl vllm-serve` starts; on a CPU build, the worker extension that reloads pushed
    weights and an eager engine instead of the NCCL engine; an option the user gives wins over an added one."""
    gpu = serve_argv("Qwen/Qwen2.5-7B", ["--port", "8000"], cpu=False)
    assert gpu[:4] == ["serve", "Qwen/Qwen2.5-7B", "--port", "8000"]
    assert gpu[4:] == [
        "--logprobs-mode", "processed_logprobs", "--max-logprobs", "-1",
        "--weight-transfer-config", '{"backend": "nccl"}',
    ]  # fmt: skip
    cpu = serve_argv("m", ["--max-logprobs", "20", "--no-enforce-eager"], cpu=True)
    assert cpu == [
        "serve", "m", "--max-logprobs", "20", "--no-enforce-eager", "--logprobs-mode", "processed_logprobs",
        "--worker-extension-cls", "recipes.stages.grpo.vllm_cpu.ServerWeightReload",
    ]  # fmt: skip


def test_the_server_script_prints_its_command_and_refuses_no_model():
    dry = subprocess.run(
        [sys.executable, "scripts/launch/vllm_serve.py", "some/model", "--port", "8123", "--dry-run"],
        cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert dry.returncode == 0 and dry.stdout.startswith("VLLM_SERVER_DEV_MODE=1 vllm serve some/model --port 8123 ")
    bare = subprocess.run(
        [sys.executable, "scripts/launch/vllm_serve.py", "--port", "8123"], cwd=REPO, capture_output=True, text=True
    )
    assert bare.returncode != 0 and "usage: python scripts/launch/vllm_serve.py MODEL" in bare.stderr
