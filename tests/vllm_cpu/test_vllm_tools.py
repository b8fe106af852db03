"""GRPO with `tools: [python]` and vLLM colocated (`make test-vllm PYTEST_ARGS='-k tools'`): TRL's tool loop takes
the vLLM engine unchanged, and our trainer's additions read its tool mask as they do on transformers.

The tiny model never writes a call by itself, so on half the rows its first two turns are scripted (a call that
defines a variable, then a call that uses it: scripts/bench/tool_cost.py's policy, which this test runs); every
other turn, the answers after the tool's results included, is vLLM's. Two steps, so the policy's weights are
pushed to the engine between them. Checked: the tool figures the trainer logs, worked out by hand; the tool
results alone are masked out (in one run per result, between the call and the next turn) and the turns after
them are vLLM's; `tokens/generated` counts the model's tokens only."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

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


def test_grpo_with_the_python_tool_on_vllm_colocated(tmp_path):
    from recipes.common.model.loading import SHIPPED_COLD_START, load_tokenizer

    figures_file = tmp_path / "figures.json"
    result = subprocess.run(
        [sys.executable, "scripts/bench/tool_cost.py", "--step-only", "--use-vllm", "--steps", "2",
         "--json", str(figures_file)],
        cwd=REPO, env=ENV, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    print(result.stdout[-1500:])
    figures = json.loads(figures_file.read_text())["step"]
    assert figures["use_vllm"] and figures["steps"] == 2
    for line in figures["log"]:  # by hand: 4 of 8 rows call twice, none fails; 2 tool results in each of those
        assert line["tools/calls_per_completion"] == pytest.approx(1.0)
        assert line["tools/failure_frac"] == 0.0 and line["tools/turns_mean"] == pytest.approx(2.0)
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
        assert len(runs) == 2, tokenizer.decode(ids)  # the two results, each one run
        results = [tokenizer.decode(ids[start:end]) for start, end in runs]
        assert "<tool_response>318549</tool_response>" in results[0]  # sum(i*i for i < 99), from the sandbox
        assert "<tool_response>1</tool_response>" in results[1]  # 318549 % 97: the second call saw the first's t
        model = tokenizer.decode([token for token, kept in zip(ids, mask, strict=True) if kept])
        assert "print(t % 97)" in model and "318549" not in model and "<tool_response>" not in model
        assert runs[-1][1] < len(ids)  # vLLM wrote a turn after the last result, and it is the model's
    assert figures["log"][0]["tokens/generated"] == model_tokens < sum(map(len, batch["completion_ids"]))
