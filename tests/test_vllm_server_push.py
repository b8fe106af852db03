"""The weight push to a vLLM server on a CPU (recipes.stages.grpo.vllm_cpu.push_to_server), with a stand-in server
client: what the trainer writes and asks for. make test-vllm runs it against a real server (tests/vllm_cpu)."""

from __future__ import annotations

import types
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from recipes.stages.grpo.vllm_cpu import RELOAD_METHOD, WEIGHTS_FILE, push_to_server


class Response:
    def __init__(self, status_code: int, text: str = ""):
        self.status_code, self.text = status_code, text


class Client:
    """What push_to_server uses of TRL's VLLMClient: its base URL, its HTTP session and reset_prefix_cache."""

    base_url = "http://127.0.0.1:1"

    def __init__(self, status_code: int = 200):
        self.posts, self.resets, self.status_code = [], 0, status_code
        self.session = types.SimpleNamespace(post=self.post)

    def post(self, url, json, timeout):
        self.posts.append((url, json))
        return Response(self.status_code, "Internal Server Error: no method rlvr_reload_weights")

    def reset_prefix_cache(self):
        self.resets += 1


def generation(model, client, main: bool = True, walked: list | None = None):
    def params():
        for name, param in model.named_parameters():
            if walked is not None:
                walked.append(name)
            yield name, param.data

    return types.SimpleNamespace(
        accelerator=types.SimpleNamespace(is_main_process=main), vllm_client=client, _iter_named_params=params
    )


@pytest.fixture
def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))


def test_the_main_process_writes_every_tensor_and_asks_the_server_to_reload(model, tmp_path, monkeypatch):
    monkeypatch.setenv("RLVR_VLLM_PUSH_DIR", str(tmp_path))
    client = Client()
    pushing = generation(model, client)
    push_to_server(pushing)
    ((url, body),) = client.posts
    folder = Path(body["kwargs"]["weights_path"])
    assert url == "http://127.0.0.1:1/collective_rpc" and body["method"] == RELOAD_METHOD
    assert folder.parent == tmp_path and client.resets == 1
    saved = load_file(folder / WEIGHTS_FILE)
    assert set(saved) == {"0.weight", "0.bias", "1.weight", "1.bias"}
    for name, param in model.named_parameters():
        assert torch.equal(saved[name], param.data)
    with torch.no_grad():
        model[0].weight.add_(1.0)  # a training step later: the same folder, the file replaced whole
    push_to_server(pushing)
    assert client.posts[1][1]["kwargs"]["weights_path"] == str(folder)
    assert torch.equal(load_file(folder / WEIGHTS_FILE)["0.weight"], model[0].weight.data)
    assert sorted(path.name for path in folder.iterdir()) == [WEIGHTS_FILE]  # no temporary file left


def test_other_processes_walk_the_parameters_and_push_nothing(model, tmp_path, monkeypatch):
    """Under ZeRO-3 each parameter's gather is a collective: every process must walk them, one process pushes."""
    monkeypatch.setenv("RLVR_VLLM_PUSH_DIR", str(tmp_path))
    client, walked = Client(), []
    push_to_server(generation(model, client, main=False, walked=walked))
    assert walked == [name for name, _ in model.named_parameters()]
    assert client.posts == [] and client.resets == 0 and list(tmp_path.iterdir()) == []


def test_a_server_that_cannot_reload_is_named_with_the_command_that_can(model, tmp_path, monkeypatch):
    monkeypatch.setenv("RLVR_VLLM_PUSH_DIR", str(tmp_path))
    with pytest.raises(RuntimeError) as error:
        push_to_server(generation(model, Client(status_code=500)))
    message = str(error.value)
    assert "http://127.0.0.1:1 did not take the weights (500" in message
    assert "python scripts/launch/vllm_serve.py MODEL" in message and str(tmp_path) in message
