"""Fixtures shared by the whole suite: the tiny model and task data, built once per test run.

Tests run offline, on the CPU, with bf16 and gradient checkpointing off (TRL turns both on by default;
on a CPU they only cost time). Under pytest-xdist the workers share one build, guarded by a file lock.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

from pathlib import Path

import pytest
from filelock import FileLock

# SmolLM2's tokenizer and the stand-in builder live with the recipes (--try_on_this_machine uses them)
from recipes.common.model.tiny import SMOLLM2_TOKENIZER as SMOL_TOKENIZER  # noqa: F401  (tests import it from here)
from recipes.common.model.tiny import save_stand_in as save_standin

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


def load_bench(name: str):
    """scripts/bench/<name>.py as a module (a benchmark is a script, not a package member)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"bench_{name}", REPO / "scripts" / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Models whose samples depend on the CPU's float kernels: a model trained here (the kernels' rounding
# compounds over its training steps) or one sampled near a coin flip. A test that uses one of them is marked
# `kernel_dependent`, and `make test` on an AVX-512 machine runs those tests once more with torch's AVX2
# kernels (ATEN_CPU_CAPABILITY=avx2): CI's machines may lack AVX-512, and a test that passes on one kernel
# only is a test of the machine.
KERNEL_DEPENDENT_FIXTURES = frozenset({"trained_tiny_model_dir", "guessing_model_dir"})


def pytest_collection_modifyitems(items) -> None:
    for item in items:
        if KERNEL_DEPENDENT_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.kernel_dependent)


@pytest.fixture(scope="session")
def shared_dir(tmp_path_factory, worker_id) -> Path:
    """A folder common to all xdist workers of this run (and private to the run)."""
    base = tmp_path_factory.getbasetemp()
    return base if worker_id == "master" else base.parent


@pytest.fixture
def two_sandbox_runs(monkeypatch):
    """The code sandbox lets this process have at least two runs at once, whatever its cores (it allows one a
    core): for tests of tool calls that overlap in wall time. Their calls sleep, so one core is enough, and the
    overlap is checked on every machine instead of skipped on a one-core one."""
    import threading

    from rewards.code.sandbox import process

    count = max(2, process.max_runs())
    monkeypatch.setattr(process, "_slots", [(count, threading.BoundedSemaphore(count))])
    return count


def build_once(shared_dir: Path, name: str, build) -> Path:
    """Run `build(target)` once per test run, whichever worker asks first; the others wait and reuse it."""
    target = shared_dir / name
    with FileLock(str(target) + ".lock"):
        done = target / ".built"
        if not done.exists():
            build(target)
            done.touch()
    return target


@pytest.fixture(scope="session")
def tiny_model_dir(shared_dir) -> Path:
    from recipes.common.model.tiny import build_tiny_model

    return build_once(shared_dir, "tiny-base", lambda target: build_tiny_model(target, seed=0))


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="session")
def tiny_model(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="session")
def shared_math_data() -> Path:
    """../shared/data/math: real competition sets, present in CI beside the clone but not in a user's clone."""
    path = SHARED_DATA / "math"
    if not path.is_dir():
        pytest.skip(f"{path} is absent (a user's clone has no ../shared); these tests need the real math sets")
    return path


@pytest.fixture(scope="session")
def guessing_model_dir(shared_dir, tiny_model_dir) -> Path:
    """tests/support/guessing_model.py: answers \\boxed{7} or \\boxed{3}, about half the time each (seconds to build)."""
    from tests.support.guessing_model import build_guessing_model

    return build_once(shared_dir, "tiny-guessing", lambda target: build_guessing_model(target, tiny_model_dir))


TRAINED_STEPS = 300


@pytest.fixture(scope="session")
def trained_tiny_model_dir(shared_dir, tiny_model_dir) -> Path:
    """The tiny model after 300 steps of the demo's cold-start SFT (about a minute on one core).

    It has learned the format (think tags, one hop per line, a boxed number, EOS) but not yet the lookup:
    its answers are mostly guesses among the numbers in the question (pass@1 about 3% on levels 1-5).
    Enough for tests that need a model that sometimes succeeds; it is built once per test run.
    """

    def build(target: Path) -> None:

        from recipes import sft

        argv = [
            "--model_name_or_path", str(tiny_model_dir), "--output_dir", str(target),
            "--max_steps", str(TRAINED_STEPS), "--dataset_num_rows", "4000", "--save_strategy", "no",
            "--lr_scheduler_type", "constant_with_warmup", "--logging_steps", "100", "--disable_tqdm", "true",
        ]  # fmt: skip
        sft.main(*sft.make_parser().parse_args(argv))

    return build_once(shared_dir, f"tiny-sft-{TRAINED_STEPS}", build)


def build_smol_standin(target: Path) -> None:
    """A randomly initialised 2-layer Llama with SmolLM2-135M-Instruct's real tokenizer and chat template.

    Everything a real model brings that the tiny one does not: a 49k BPE vocabulary, a chat template with
    its own system prompt and no {% generation %} markers, pad = EOS = <|im_end|>, tied embeddings. Its
    weights are random (it writes noise); the real weights are exercised by `make test-real`.
    """
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(SMOL_TOKENIZER)
    save_standin(
        target, tokenizer, LlamaConfig, LlamaForCausalLM, hidden_size=32, intermediate_size=64,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
    )  # fmt: skip


@pytest.fixture(scope="session")
def smol_standin_dir(shared_dir) -> Path:
    return build_once(shared_dir, "smol-standin", build_smol_standin)
