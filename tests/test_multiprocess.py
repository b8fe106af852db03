"""Launches with several processes, run for real (two processes on the CPU, gloo), kept as small as possible:
the tiny model, one or two steps, two prompts per process.

* a launch that asks for two processes trains as two cooperating processes (one run card that says so, one
  "saved to"), also without `--use_cpu true` on a machine without a GPU;
* a launch that asks for two but gets one (accelerate's `--num_processes 2` alone on a CPU) is started
  again as two (or, where it cannot be, stops at once with one line that says what to type);
* DeepSpeed ZeRO-2 and ZeRO-3 (recipes/accelerate/zero2.yaml, zero3.yaml) train and save a model that loads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from transformers import AutoModelForCausalLM

from recipes.common.command_line.config import CONFIG_DIR
from tests.conftest import REPO

TINY_RUN = [
    "--max_steps", "1", "--num_generations", "2", "--per_device_train_batch_size", "2",
    "--max_completion_length", "8", "--dataset_num_rows", "4", "--dataset_name", "synthetic:1",
    "--logging_steps", "1", "--save_strategy", "no", "--disable_tqdm", "true",
]  # fmt: skip

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="these launches test the CPU (gloo) path")


def launch(
    launcher: list[str],
    model,
    out,
    *extra: str,
    config: str = "demo/grpo.yaml",
    timeout: int = 600,
    site: str = "",
    environment: dict | None = None,
):
    path = os.pathsep.join(filter(None, [site, str(REPO), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PYTHONPATH": path, **(environment or {})}
    env.pop("WORLD_SIZE", None)
    command = [sys.executable, "-m", "accelerate.commands.launch", *launcher, "--main_process_port", "0"]
    command += [str(REPO / "recipes" / "grpo.py"), "--config", str(CONFIG_DIR / config)]
    command += ["--model_name_or_path", str(model), "--output_dir", str(out), *TINY_RUN, *extra]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout, cwd=REPO)


def test_two_processes_without_use_cpu_train_together(tiny_model_dir, tmp_path):
    """multi_cpu.yaml without --use_cpu true: two processes, one gloo group, one run card, one "saved to"."""
    out = tmp_path / "two"
    config = str(REPO / "recipes/accelerate/multi_cpu.yaml")
    result = launch(["--config_file", config], tiny_model_dir, out, "--max_steps", "2")
    assert result.returncode == 0, result.stderr[-4000:]
    card = json.loads((out / "run_card.json").read_text())
    assert card["processes"] == 2 and card["final_step"] == 2
    assert card["distributed"] == {"type": "MULTI_CPU", "device": "cpu"} or card["distributed"]["type"] == "MULTI_GPU"
    assert result.stderr.count("saved to") == 1, result.stderr[-4000:]
    assert AutoModelForCausalLM.from_pretrained(out) is not None


def test_a_plain_num_processes_launch_on_a_cpu_runs_as_that_many_processes(tiny_model_dir, tmp_path):
    """`accelerate launch --num_processes 2` on a CPU starts one process; the recipe starts the run again as the two
    meant (issue 40: before, the advice twice and accelerate's traceback), and says each thing once: no DDP
    `find_unused_parameters` warning per process, the warm-up warning once."""
    out = tmp_path / "plain"
    result = launch(["--num_processes", "2"], tiny_model_dir, out, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    assert json.loads((out / "run_card.json").read_text())["processes"] == 2
    assert result.stderr.count("starting the run again as 2 processes") == 1
    assert result.stderr.count("saved to") == 1 and "find_unused_parameters" not in result.stderr
    assert result.stderr.count("never leaves warm-up") == 1, result.stderr[-4000:]
    assert "Traceback" not in result.stderr


def test_a_launch_that_lost_its_processes_and_cannot_start_again_stops_at_once(tiny_model_dir, tmp_path):
    """Where the run cannot be started again (here: it already was once), one line says what to type."""
    out = tmp_path / "lost"
    result = launch(["--num_processes", "2"], tiny_model_dir, out, timeout=300, environment={"RLVR_RELAUNCHED": "1"})
    assert result.returncode != 0
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "multi_cpu.yaml" in errors[0], result.stderr[-3000:]
    assert not out.exists()  # nothing trained, nothing written


# Loaded by every Python process of a launch (PYTHONPATH): a recipe process that reaches the interpreter's
# teardown leaves a file behind. DeepSpeed keeps process groups alive in module globals until then, and one
# finished ZeRO-3 run aborted there (exit -6), so a finished recipe process must end before it.
TEARDOWN_PROBE = """
import atexit, os, sys
if sys.argv and sys.argv[0].endswith("grpo.py"):
    atexit.register(lambda: open(os.path.join({folder!r}, "teardown-%d" % os.getpid()), "w").close())
"""


# Loaded the same way: DeepSpeed's torch backend starts by compiling its CPU shared-memory all-reduce kernel
# (deepspeed/comm/torch.py build_shm_op, a C++ JIT build into ~/.cache/torch_extensions: about two minutes on a
# fresh machine, which CI always is). That kernel serves one call only, `inference_all_reduce` (DeepSpeed's
# tensor-parallel inference, torch.ops.deepspeed.inference_all_reduce_); ZeRO's training collectives (all-reduce,
# reduce-scatter, all-gather) go through torch.distributed's gloo group whether it is built or not. What these
# tests check is our recipe under ZeRO (two processes, one run card, one save, a model that loads, no teardown),
# not DeepSpeed's inference kernel, so each process takes the path DeepSpeed itself takes where the kernel cannot
# be had (build_shm_op() is None, as off Linux): the same training, without the compile.
NO_SHM_KERNEL = """
import importlib.abc, importlib.util, sys
class _NoShmKernel(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "deepspeed.comm.torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        run = spec.loader.exec_module
        def exec_module(module):
            run(module)
            module.build_shm_op = lambda: None
        spec.loader.exec_module = exec_module
        return spec
sys.meta_path.insert(0, _NoShmKernel())
"""


@pytest.mark.parametrize("stage", [2, 3])
def test_deepspeed_zero_two_processes(stage, tiny_model_dir, tmp_path):
    out, site = tmp_path / f"zero{stage}", tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(TEARDOWN_PROBE.format(folder=str(site)) + NO_SHM_KERNEL)
    config = str(REPO / f"recipes/accelerate/zero{stage}.yaml")
    launcher = ["--config_file", config, "--num_processes", "2", "--mixed_precision", "no"]
    recipe = "demo/dapo.yaml" if stage == 3 else "demo/grpo.yaml"
    result = launch(launcher, tiny_model_dir, out, config=recipe, site=str(site))
    assert result.returncode == 0, result.stderr[-4000:]
    assert sorted(p.name for p in site.iterdir() if p.name.startswith("teardown")) == [], "a process reached teardown"
    card = json.loads((out / "run_card.json").read_text())
    assert card["processes"] == 2 and card["final_step"] == 1
    assert card["distributed"] == {"type": "DEEPSPEED", "device": "cpu", "zero_stage": stage}
    assert result.stderr.count("saved to") == 1, result.stderr[-4000:]
    model = AutoModelForCausalLM.from_pretrained(out)  # ZeRO-3 gathers the shards into one saved model
    reference = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert model.num_parameters() == reference.num_parameters()
