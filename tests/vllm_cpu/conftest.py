"""The vLLM server the server-mode tests share (test_vllm_server.py, test_vllm_tools.py): one start a session.

One vLLM server process (scripts/launch/vllm_serve.py, as a user starts it) serves the tiny cold start on
localhost. A test against it pushes its own policy's weights before it generates (every GRPO step does), so what an
earlier test left in the server does not reach a later one.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.conftest import REPO

MODEL = "recipes/assets/tiny-cold-start"
SERVER_START_S = 300


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    from tests.vllm_cpu.test_vllm_cpu import ENV

    port = free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"
    command = [sys.executable, "scripts/launch/vllm_serve.py", MODEL, "--port", str(port), "--max-model-len", "512"]
    with log.open("w") as sink:
        process = subprocess.Popen(command, cwd=REPO, env=ENV, stdout=sink, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + SERVER_START_S
    try:
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the vLLM server did not start (exit {process.poll()}):\n{log.read_text()[-4000:]}")
            time.sleep(2)
        print(f"vLLM server up on {url}: {' '.join(command)}")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
