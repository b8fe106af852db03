"""Issue 40, item 2: a Hub id on a machine that cannot reach the Hub is one line in seconds, not a minute of the
Hub client's retries and a traceback (exit 1), whether or not HF_HUB_OFFLINE is set.

The Hub's endpoint is pointed at a closed port on this machine (HF_ENDPOINT), so the tests behave the same on
a machine that can reach the real Hub.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tasks import hub

REPO = Path(__file__).resolve().parents[1]


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # nothing listens there once the probe is closed


@pytest.fixture
def unreachable_hub(monkeypatch, tmp_path):
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache
    hub.hub_reachable.cache_clear()
    yield endpoint
    hub.hub_reachable.cache_clear()


def test_an_unreachable_hub_is_one_reason_naming_the_id_and_the_way_out(unreachable_hub):
    problem = hub.hub_problem("Qwen/Qwen2.5-Math-1.5B", "model")
    assert "'Qwen/Qwen2.5-Math-1.5B'" in problem and unreachable_hub in problem
    assert "HF_HUB_OFFLINE=1" in problem and "local path" in problem and "\n" not in problem
    dataset = hub.hub_problem("org/set", "dataset")
    assert "Hub dataset 'org/set'" in dataset and "--repo-type dataset" in dataset


def test_a_reachable_hub_or_offline_mode_is_left_to_the_hub_client(monkeypatch, unreachable_hub):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.getsockname()[1]}")
        assert hub.hub_problem("org/name", "model") is None
    monkeypatch.setenv("HF_ENDPOINT", unreachable_hub)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert hub.hub_problem("org/set", "dataset") is None  # datasets reads its own cache offline
    assert "not in the local cache and HF_HUB_OFFLINE is set" in hub.hub_problem("org/name", "model")


def _run(argv: list[str], endpoint: str, tmp_path) -> tuple[subprocess.CompletedProcess, float]:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")}
    env.update(HF_ENDPOINT=endpoint, HF_HOME=str(tmp_path / "hf"), PYTHONPATH=str(REPO))
    start = time.monotonic()
    done = subprocess.run([sys.executable, *argv], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    return done, time.monotonic() - start


# Not a speed target: the bound only tells one look at the endpoint (seconds) from the Hub client's retries
# (about 50 s at db84883, which then ended with a traceback and exit 1).
RETRIES_S = 30


def test_evaluate_with_a_hub_model_that_cannot_be_had_is_one_line_and_exit_2(unreachable_hub, tmp_path):
    argv = ["-m", "eval.evaluate", "--model", "Qwen/Qwen2.5-Math-1.5B", "--dataset", "aime24", "--n", "1"]
    done, seconds = _run([*argv, "--output-dir", str(tmp_path / "out")], unreachable_hub, tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Qwen/Qwen2.5-Math-1.5B" in lines[0] and "HF_HUB_OFFLINE=1" in lines[0], lines
    assert seconds < RETRIES_S


@pytest.mark.parametrize(
    "flag, name", [("--model_name_or_path", "Qwen/Qwen2.5-Math-1.5B"), ("--dataset_name", "org/set")]
)
def test_grpo_with_a_hub_id_that_cannot_be_had_stops_with_one_error_line(flag, name, unreachable_hub, tmp_path):
    argv = [str(REPO / "recipes" / "grpo.py"), flag, name, "--max_steps", "1", "--output_dir", str(tmp_path / "run")]
    done, seconds = _run(argv, unreachable_hub, tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and name in errors[0] and "HF_HUB_OFFLINE=1" in errors[0], done.stderr[-2000:]
    assert "Traceback" not in done.stderr and seconds < RETRIES_S
