"""Issue 28, item 12: the library warnings every run printed are gone at their source (recipes.common.training.library_noise)
and the install asks only for extras that its packages provide."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import subprocess
import sys

import pytest

from recipes.common.training import library_noise
from tests.conftest import REPO

DEEPSPEED_PROBE = "Setting accelerator to CPU"
CHECKPOINTING_ALIAS = "`is_gradient_checkpointing` is deprecated"


def test_a_short_grpo_run_prints_neither_deepspeed_s_probe_nor_trl_s_checkpointing_aliases(tiny_model_dir, tmp_path):
    """A fresh process, as a user runs it: with a checkpoint every step the Trainer's catch_warnings around each
    save resets Python's once-per-place memory, so TRL's alias warning came back at every step."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    env.pop("DS_ACCELERATOR", None)
    env.pop("PYTHONWARNINGS", None)
    argv = [
        "--model_name_or_path", str(tiny_model_dir), "--output_dir", str(tmp_path / "run"), "--max_steps", "2",
        "--num_generations", "4", "--per_device_train_batch_size", "4", "--max_completion_length", "8",
        "--dataset_num_rows", "8", "--logging_steps", "1", "--save_strategy", "steps", "--save_steps", "1",
        "--dataset_name", "synthetic:1-2", "--use_cpu", "true", "--disable_tqdm", "true", "--report_to", "none",
    ]  # fmt: skip
    run = subprocess.run(
        [sys.executable, str(REPO / "recipes" / "grpo.py"), *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=REPO,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-3000:]
    assert (tmp_path / "run" / "checkpoint-2").is_dir()  # both saves happened, each one a reset of the registry
    assert CHECKPOINTING_ALIAS not in run.stdout, run.stdout[-3000:]
    # DeepSpeed probes (and warned) only where it is installed and finds no accelerator; elsewhere this holds anyway
    assert DEEPSPEED_PROBE not in run.stdout, run.stdout[-3000:]


def test_the_deepspeed_switch_is_left_to_the_user_and_to_machines_with_an_accelerator(monkeypatch):
    monkeypatch.setenv("DS_ACCELERATOR", "cuda")
    assert library_noise.quiet_deepspeed_accelerator_probe() is False
    assert os.environ["DS_ACCELERATOR"] == "cuda"

    monkeypatch.delenv("DS_ACCELERATOR")
    monkeypatch.delitem(sys.modules, "deepspeed", raising=False)
    monkeypatch.setattr(library_noise, "_installed", lambda name: name == "deepspeed")
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: True)
    assert library_noise.quiet_deepspeed_accelerator_probe() is False and "DS_ACCELERATOR" not in os.environ
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: False)
    assert library_noise.quiet_deepspeed_accelerator_probe() is True and os.environ["DS_ACCELERATOR"] == "cpu"


def test_only_the_alias_warnings_that_trl_triggers_are_filtered():
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        library_noise.ignore_trl_checkpointing_aliases()
        for text in ("is_gradient_checkpointing", "gradient_checkpointing_enable", "some_other_method"):
            warnings.warn_explicit(
                f"`{text}` is deprecated and will be removed in v6.", FutureWarning, "modeling_utils.py", 1,
                module="transformers.modeling_utils",
            )  # fmt: skip
        warnings.warn_explicit(
            "`is_gradient_checkpointing` is deprecated", FutureWarning, "mine.py", 1, module="my_package.models"
        )
    assert [str(w.message).split("`")[1] for w in caught] == ["some_other_method", "is_gradient_checkpointing"]


def _requested_extras_are_provided(requirement: str, seen: set) -> list[str]:
    """Extras that `requirement` asks of an installed distribution that it does not provide under that exact
    spelling (pip before 23.3 compares them literally), following the extras' own requirements."""
    from packaging.requirements import Requirement

    parsed = Requirement(requirement)
    if parsed.marker is not None and not parsed.marker.evaluate({"extra": ""}):
        return []
    try:
        metadata = importlib.metadata.metadata(parsed.name)
    except importlib.metadata.PackageNotFoundError:
        return []
    provided = metadata.get_all("Provides-Extra") or []
    missing = [f"{parsed.name}[{extra}]" for extra in sorted(parsed.extras) if extra not in provided]
    for extra in sorted(parsed.extras & set(provided)):
        if (parsed.name, extra) in seen:
            continue
        seen.add((parsed.name, extra))
        for child in importlib.metadata.requires(parsed.name) or []:
            child_requirement = Requirement(child)
            if child_requirement.marker is not None and child_requirement.marker.evaluate({"extra": extra}):
                child_requirement.marker = None
                missing += _requested_extras_are_provided(str(child_requirement), seen)
    return missing


def test_every_extra_the_install_asks_for_is_one_its_package_provides():
    """pip warned "math-verify 0.9.0 does not provide the extra 'antlr4_13_2'" at every `make setup`."""
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    requirements = project["dependencies"] + [
        spec for specs in project["optional-dependencies"].values() for spec in specs
    ]
    seen: set = set()
    assert [missing for spec in requirements for missing in _requested_extras_are_provided(spec, seen)] == []


def test_math_verify_gets_the_antlr_runtime_its_parser_is_built_for():
    from math_verify import parse  # a dependency of the project: missing, this fails

    assert importlib.metadata.version("antlr4-python3-runtime") == "4.13.2"
    assert parse(r"$\frac{1}{2}$")  # the LaTeX parser loads with this runtime
