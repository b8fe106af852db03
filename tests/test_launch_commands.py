"""scripts/launch/commands.py (issue 35, item 4): the commands of a multi-node run, as each node must run them;
scripts/launch/vllm_serve.py: the vLLM node's server, on a GPU or a CPU build. Issue 57, item 5: the printer
keeps the config's global batch on another process count (or refuses in one line), every line names its
interpreter and environment, and train.slurm's wait for the vLLM node ends. The lines run as printed, on one
machine, in tests/vllm_cpu/test_launch_lines.py (`make test-vllm`)."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time

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
    # the config's own model, from the Hub: the node's own HF_HUB_OFFLINE setting decides (download or cache)
    assert serve.startswith(f"cd {REPO} && .venv/bin/python scripts/launch/vllm_serve.py Qwen/Qwen2.5-7B ")
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
    assert result.returncode == 2 and result.stderr.strip().count("\n") == 0 and "needs --vllm-host" in result.stderr


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


SEVEN_B = "recipes/configs/qwen2.5-7b/dapo.yaml"  # 8 a process x 16 accumulation x 16 GPUs = 2048 completions


def printed(capsys, *argv: str) -> tuple[list[str], str]:
    """(the command lines, stderr) of the printer run as `python scripts/launch/commands.py ARGV`."""
    from scripts.launch.commands import main

    main(list(argv))
    out, err = capsys.readouterr()
    return [line for line in out.splitlines() if not line.startswith("#")], err


def test_four_nodes_of_eight_keep_the_configs_2048_completions_a_step(capsys):
    """32 processes x 8 a process = 256 completions a micro-step: 2048 / 256 = 8 accumulation steps, not the
    config's 16 (which would make 4096), and one line says so."""
    lines, err = printed(capsys, "--config", SEVEN_B, "--nodes", "4", "--gpus-per-node", "8", "--main-ip", "10.0.0.1")
    assert len(lines) == 4
    assert all("--num_processes 32 " in line and " --gradient_accumulation_steps 8" in line for line in lines)
    (note,) = err.strip().splitlines()
    assert "2048" in note and "16 -> 8" in note
    # at the 16 processes the config was written for nothing changes, and the line says the batch was kept
    lines, err = printed(capsys, "--config", SEVEN_B, "--nodes", "2", "--gpus-per-node", "8")
    assert all("--gradient_accumulation_steps" not in line for line in lines) and "2048" in err and "kept" in err


def test_one_node_of_eight_takes_the_accumulation_the_scaling_doc_gives(capsys):
    """docs/scaling.md's 7B on 8 GPUs: 8 x 8 x 32 = the config's 2048."""
    lines, _ = printed(capsys, "--config", SEVEN_B, "--nodes", "1", "--gpus-per-node", "8")
    assert lines[0].endswith(f"--config {SEVEN_B} --gradient_accumulation_steps 32")


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (["--nodes", "3", "--gpus-per-node", "8"], "--global-batch 2112"),  # 24 x 8 = 192 does not divide 2048
        (["--nodes", "64", "--gpus-per-node", "8"], "--global-batch 4096"),  # 512 x 8 = 4096 > 2048
        (["--nodes", "4", "--global-batch", "1000"], "num_generations 16"),  # not a whole number of groups
        (["--nodes", "4", "--", "--gradient_accumulation_steps", "4"], "give --global-batch N instead"),
        (["--nodes", "2", "--node-rank", "2"], "--node-rank 2"),
    ],
)
def test_a_batch_or_a_node_that_does_not_fit_is_refused_in_one_line(options, named):
    result = subprocess.run(
        [sys.executable, "scripts/launch/commands.py", "--config", SEVEN_B, *options],
        cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 2 and result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and named in line


def test_every_line_names_its_interpreter_and_environment(capsys):
    """Pasted into a shell on its node, a line needs nothing of that shell: the checkout, the venv's interpreter
    (accelerate as its module), the Hub switched off where everything is local, the push folder where given."""
    lines, _ = printed(
        capsys, "--config", "recipes/configs/demo/dapo.yaml", "--nodes", "2", "--gpus-per-node", "1",
        "--vllm-mode", "server", "--vllm-host", "127.0.0.1", "--push-dir", "/shared/push",
        "--", "--model_name_or_path", "recipes/assets/tiny-cold-start", "--rewards", "[{name: math_accuracy}]",
    )  # fmt: skip
    serve, *training = lines
    assert serve.startswith(f"cd {REPO} && HF_HUB_OFFLINE=1 .venv/bin/python scripts/launch/vllm_serve.py ")
    assert " recipes/assets/tiny-cold-start " in serve  # the model the trainers push to is the one it serves
    for line in training:
        assert line.startswith(
            f"cd {REPO} && HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 RLVR_VLLM_PUSH_DIR=/shared/push "
            ".venv/bin/python -m accelerate.commands.launch "
        )
        assert line.endswith("--model_name_or_path recipes/assets/tiny-cold-start --rewards '[{name: math_accuracy}]'")
    for line in lines:  # each is one valid shell command
        assert subprocess.run(["bash", "-n", "-c", line], check=False).returncode == 0
    hub, _ = printed(capsys, "--config", SEVEN_B, "--python", "/opt/env/bin/python")
    assert hub[0].startswith(f"cd {REPO} && /opt/env/bin/python -m accelerate.commands.launch ")


def test_the_processes_each_config_was_written_for_are_its_comments_arithmetic():
    """CONFIG_PROCESSES states what the GPU configs' comments say ("16 GPUs x 8 x 16 accumulation = 2048")."""
    import yaml

    from scripts.launch.commands import CONFIG_DIR, CONFIG_PROCESSES

    stating = {
        str(path.relative_to(CONFIG_DIR))
        for path in CONFIG_DIR.glob("*/*.yaml")
        if re.search(r"per_device_train_batch_size:.*\d+ GPUs x", path.read_text())
    }
    assert set(CONFIG_PROCESSES) == stating
    for name, processes in CONFIG_PROCESSES.items():
        text = (CONFIG_DIR / name).read_text()
        stated = re.search(r"(\d+) GPUs x (\d+) x (\d+) accumulation = (\d+)", text)
        gpus, per_device, accumulation, batch = map(int, stated.groups())
        config = yaml.safe_load(text)
        assert gpus == processes and per_device == config["per_device_train_batch_size"]
        assert accumulation == config["gradient_accumulation_steps"] and batch == processes * per_device * accumulation


def test_the_slurm_scripts_wait_for_the_vllm_server_ends_and_names_what_it_waited_for():
    """Nothing listens on the port: the wait ends after its timeout; a server process that ended: at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}/health"  # bound, not listening: refused
        for pid, said in (("$$", "did not answer within 2 s"), ("2147483647", "ended before")):
            start = time.monotonic()
            result = subprocess.run(
                ["bash", "-c", f"source scripts/launch/train.slurm && wait_for_vllm {url} 2 {pid}"],
                cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
            )  # fmt: skip
            assert result.returncode == 1 and time.monotonic() - start < 30
            assert url in result.stderr and said in result.stderr and "vLLM server" in result.stderr
