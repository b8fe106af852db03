"""GRPO with `tools: [python]` on vLLM (`make test-vllm PYTEST_ARGS='-k tools'`): TRL's tool loop takes the vLLM
engine, colocated or a server, unchanged, and our trainer's additions read its tool mask as they do on transformers.

- The tool demo as a user runs it, colocated: `recipes/grpo.py --config recipes/configs/demo/dapo_tools.yaml
  --max_steps 4 --use_vllm true --vllm_mode colocate` (smaller rollouts, from the shipped cold start: no tool cold
  start ships, so the model calls the tool only by chance); each step logs the tool figures, consistent with each
  other.
- Real calls, colocated and against the session's vLLM server (conftest.py): the tiny model never writes a call by
  itself, so on half the rows its first two turns are scripted (a call that defines a variable, then a call that
  uses it: scripts/bench/tool_cost.py's policy, which these tests run; against the server the first call alone,
  see its test); every other turn, the answers after the tool's results included, is vLLM's. Colocated, two steps, so the policy's weights are pushed to the engine
  between them; the server, one (pushed before it, as every step). Checked: the tool figures the trainer logs,
  worked out by hand; the tool results alone are masked out (in one run per result, between the call and the next
  turn) and the turns after them are vLLM's; `tokens/generated` counts the model's tokens only. The server needs
  no tool template of its own: TRL renders each turn's prompt with the trainer's tokenizer (the tool template) and
  sends the server token ids.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.vllm_cpu.test_vllm_cpu import run

pytestmark = pytest.mark.vllm
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "VLLM_CPU_KVCACHE_SPACE": "1"}


def _zero_runs(mask: list[int]) -> list[tuple[int, int]]:
    """The (start, end) of each run of 0 in a tool mask."""
    runs, start = [], None
    for index, kept in enumerate([*mask, 1]):
        if not kept and start is None:
            start = index
        elif kept and start is not None:
            runs.append((start, index))
            start = None
    return runs


def _server_step_figures(path, url: str) -> dict:
    """scripts/bench/tool_cost.py's step part against the server at `url`, one step, one scripted call a calling row
    (the server's context, 512 tokens like the colocated engine's, is too short for two: see the test)."""
    code = (
        # the bench loaded by its path (only recipes/_checkout.py edits sys.path: tests/test_packaging.py)
        "import importlib.util, json, sys; "
        "spec = importlib.util.spec_from_file_location('tool_cost', 'scripts/bench/tool_cost.py'); "
        "tool_cost = sys.modules['tool_cost'] = importlib.util.module_from_spec(spec); spec.loader.exec_module(tool_cost); "
        "script = tool_cost.script_tool_turns; "
        "tool_cost.script_tool_turns = lambda *args: script(*args, calls=tool_cost.STEP_CALLS[:1]); "
        f"figures = tool_cost.step_figures(1, use_vllm=True, vllm_mode='server', vllm_server_base_url={url!r}, "
        f"max_completion_length=200); print(figures['means']); open({str(path)!r}, 'w').write(json.dumps(figures))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=ENV, capture_output=True, text=True, timeout=900, check=False
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    print(result.stdout[-1500:])
    return json.loads(path.read_text())


def _check_scripted_steps(figures: dict, steps: int, results: tuple[str, ...], last_call: str) -> None:
    """The tool figures of tool_cost's scripted policy, by hand (4 of 8 rows call, each call answers one of
    `results`, none fails), and its first batch's tool masks (`last_call`: in the last scripted call's code)."""
    from recipes.common.model.loading import SHIPPED_COLD_START, load_tokenizer

    assert figures["use_vllm"] and figures["steps"] == steps
    calls = len(results)
    for line in figures["log"]:  # by hand: 4 of 8 rows call `calls` times, one tool result each call
        assert line["tools/calls_per_completion"] == pytest.approx(calls / 2)
        assert line["tools/failure_frac"] == 0.0 and line["tools/turns_mean"] == pytest.approx(1 + calls / 2)
        assert line["tools/call_frequency"] > 0 and line["timing_s/tools"] > 0  # TRL's own figure beside ours
        assert line["timing_s/update_weights"] > 0 and line["timing_s/generate"] > 0  # vLLM got the weights, sampled

    tokenizer = load_tokenizer(str(SHIPPED_COLD_START))
    batch = figures["first_batch"]
    model_tokens = 0
    for row, (ids, mask) in enumerate(zip(batch["completion_ids"], batch["tool_mask"], strict=True)):
        assert len(ids) == len(mask)
        model_tokens += sum(mask)
        runs = _zero_runs(mask)
        if row % 2:  # answered at once by vLLM: nothing masked
            assert runs == []
            continue
        assert len(runs) == calls, tokenizer.decode(ids)  # the results, each one run
        for (start, end), result in zip(runs, results, strict=True):
            assert f"<tool_response>{result}</tool_response>" in tokenizer.decode(ids[start:end])
        model = tokenizer.decode([token for token, kept in zip(ids, mask, strict=True) if kept])
        assert last_call in model and results[0] not in model and "<tool_response>" not in model
        assert runs[-1][1] < len(ids)  # vLLM wrote a turn after the last result, and it is the model's
    assert figures["log"][0]["tokens/generated"] == model_tokens < sum(map(len, batch["completion_ids"]))


def test_the_tool_demo_trains_on_vllm_colocated(tmp_path):
    """The command of tests/test_sft_tools.py's dapo_tools test, on vLLM colocated, the policy's turns all its own."""
    out = tmp_path / "dapo_tools"
    run(
        "recipes/grpo.py", "--config", "recipes/configs/demo/dapo_tools.yaml", "--max_steps", "4",
        "--use_vllm", "true", "--vllm_mode", "colocate", "--vllm_max_model_length", "512",
        "--model_name_or_path", "recipes/assets/tiny-cold-start", "--output_dir", str(out),
        "--num_generations", "2", "--per_device_train_batch_size", "4", "--max_completion_length", "160",
        "--dynamic_sampling", "false", "--dataset_num_rows", "8", "--save_strategy", "no", "--disable_tqdm", "true",
    )  # fmt: skip
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [line for line in lines if "timing_s/step" in line]
    assert len(steps) == 4
    for line in steps:
        calls, failed = line["tools/calls_per_completion"], line["tools/failure_frac"]
        assert line["timing_s/generate"] > 0 and line["timing_s/tools"] >= 0
        assert line["tools/turns_mean"] >= 1.0 and 0.0 <= failed <= 1.0
        if calls == 0:  # no call (the cold start has not learned to): no failure, one turn, no time in tools
            assert failed == 0.0 and line["tools/turns_mean"] == 1.0 and line["timing_s/tools"] == 0
        else:  # a call the model wrote by itself: at most max_tool_calling_iterations (2) a completion
            assert calls <= 2 and line["tools/turns_mean"] <= 1.0 + calls
    card = json.loads((out / "run_card.json").read_text())
    assert card["final_step"] == 4 and card["config"]["script"]["tools"] == ["python"]


def test_grpo_with_the_python_tool_on_vllm_colocated(tmp_path):
    figures_file = tmp_path / "figures.json"
    result = subprocess.run(
        [sys.executable, "scripts/bench/tool_cost.py", "--step-only", "--use-vllm", "--steps", "2",
         "--json", str(figures_file)],
        cwd=REPO, env=ENV, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    print(result.stdout[-1500:])
    # 318549 = sum(i*i for i < 99), from the sandbox; 1 = 318549 % 97: the second call saw the first's t
    _check_scripted_steps(json.loads(figures_file.read_text())["step"], 2, ("318549", "1"), "print(t % 97)")


def test_grpo_with_the_python_tool_against_a_vllm_server(server, tmp_path):
    """TRL asks the server for `max_completion_length` new tokens on every turn, and vLLM's server refuses a request
    whose prompt and new tokens overflow its context (an engine colocated stops at the context's end): after a call
    the prompt holds the completion so far, so the server's context must hold the prompt and twice
    `max_completion_length`. Here: a prompt of at most about 70 tokens, a call and its result about 150, 200 new."""
    figures = _server_step_figures(tmp_path / "figures.json", server)
    _check_scripted_steps(figures, 1, ("318549",), "print(t)")
