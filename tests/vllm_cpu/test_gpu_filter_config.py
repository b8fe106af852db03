"""The GPU data-filter config (recipes/configs/data_filters/math_rl_gpu.yaml) runs its sampling steps on vLLM.

Every option as written except what a machine without the Hub or a GPU cannot have, each said here: the input
(a local file with the config's columns, one row a copy of a held-out problem), the model (the tiny cold start,
served by vLLM's CPU build as the config's `backend: vllm` asks; no Qwen3-8B offline), the eval sets of the
decontamination step (a local file), the output folder, and the sampling steps' `max_new_tokens` (32: the
stand-in's context is 512 tokens, the config's 8192 would not fit it). The pipeline then deduplicates,
classifies, decontaminates, and samples pass rates and direct answers with vLLM; its report adds up.
"""

from __future__ import annotations

import json

import pytest
import yaml

from recipes.common.command_line.config import CONFIG_DIR
from tests.conftest import REPO
from tests.vllm_cpu.test_vllm_cpu import run

pytestmark = pytest.mark.vllm
CONFIG = CONFIG_DIR / "data_filters" / "math_rl_gpu.yaml"
HELD_OUT = "Find the sum of all positive divisors of 36."


def test_the_gpu_filter_config_samples_with_vllm(tmp_path):
    config = yaml.safe_load(CONFIG.read_text())
    assert config["model"]["backend"] == "vllm"
    rows = [{"problem": f"What is {i} + {i + 3}?", "solution": f"\\boxed{{{2 * i + 3}}}"} for i in range(10)]
    rows += [{"problem": HELD_OUT, "solution": "\\boxed{91}"}, rows[0]]  # one contaminated, one duplicate
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    held_out = tmp_path / "eval.jsonl"
    held_out.write_text(json.dumps({"problem": HELD_OUT, "answer": "91"}) + "\n")
    config["input"]["dataset_name"] = str(source)
    config["model"]["name_or_path"] = str(REPO / "recipes" / "assets" / "tiny-cold-start")
    for step in config["steps"]:
        if step["step"] == "decontaminate":
            step["eval_sets"] = [str(held_out)]
        if "max_new_tokens" in step:
            step["max_new_tokens"] = 32
    config["output"] = {"path": str(tmp_path / "pool.jsonl"), "report_dir": str(tmp_path / "report")}
    written = tmp_path / "config.yaml"
    written.write_text(yaml.safe_dump(config))
    run("-m", "data_filters", "--config", str(written))
    report = json.loads(next((tmp_path / "report").glob("*.report.json")).read_text())
    names = [step["step"] for step in report["steps"]]
    assert names == ["dedup", "question_type", "decontaminate", "pass_rate", "no_think"]
    assert report["steps"][0]["dropped"] == 1 and report["steps"][2]["dropped"] == 1
    previous = report["loading"]["rows_kept"]
    for step in report["steps"]:
        assert step["rows_in"] == previous and step["dropped"] == step["rows_in"] - step["rows_out"]
        previous = step["rows_out"]
    kept = [json.loads(line) for line in (tmp_path / "pool.jsonl").read_text().splitlines()]
    assert len(kept) == report["rows_out"]
    assert all(row["pass_rate"] == 0.0 for row in kept)  # keep: kimi keeps what all 8 samples fail
