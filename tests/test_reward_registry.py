"""The reward registry finds the built-in rewards itself, and `register(name, accuracy=True)` is all it takes for
a reward to be an accuracy reward: dynamic sampling's variance, the curriculum and the monitor read those."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rewards import accuracy_reward_names, accuracy_rewards, available_rewards, build_rewards, get_reward, register
from rewards.registry import _reward_modules, unregister
from tests.conftest import REPO

# The built-in rewards: those the hand-kept module list registered before the registry found them itself, and the
# learned ones added since (rewards/learned/reward_models.py, rewards/learned/llm_judge.py).
BUILTIN_REWARDS = {
    "code_binary",
    "code_pass_rate",
    "constant",
    "cosine",
    "format_only",
    "kimi_length",
    "language_consistency",
    "length_penalty",
    "llm_judge",
    "math_accuracy",
    "overlong",
    "random",
    "reward_model",
    "repetition",
    "tag_count",
    "think_format",
}
BUILTIN_ACCURACY = {"math_accuracy", "code_pass_rate", "code_binary"}


def _ones(completions, **kwargs):
    return [1.0] * len(completions)


def trainer_variance(specs: list) -> list[str] | None:
    """What RLVRGRPOTrainer reads a group's variance from by default (None: the weighted sum), given the reward
    functions built from `specs` (the trainer sees their names)."""
    from recipes.stages.grpo.config import variance_reward_names

    return variance_reward_names(None, [function.__name__ for function in build_rewards(specs)[0]])


@pytest.fixture
def throwaway():
    """Register rewards under test-only names; each is unregistered afterwards, whatever the test did."""
    names = []

    def add(name: str, **options):
        names.append(name)
        register(name, **options)(lambda: _ones)
        return name

    yield add
    for name in names:
        unregister(name)
    assert not set(names) & set(available_rewards())


def test_the_discovered_builtins_are_the_library():
    assert set(available_rewards()) == BUILTIN_REWARDS
    assert set(accuracy_rewards()) == BUILTIN_ACCURACY


def test_a_reward_registered_as_accuracy_drives_dynamic_sampling_with_no_other_edit(throwaway):
    name = throwaway("test_registry_verdict", accuracy=True)
    specs = [{"name": "overlong", "weight": 1.0}, {"name": name, "weight": 1.0}]
    assert name in accuracy_rewards()
    assert accuracy_reward_names(specs) == [name]
    assert trainer_variance(specs) == [name]
    assert get_reward(name)(["a", "b"]) == [1.0, 1.0]


def test_a_reward_registered_without_accuracy_is_not_an_accuracy_reward(throwaway):
    name = throwaway("test_registry_shaping")
    specs = [{"name": "overlong", "weight": 1.0}, {"name": name, "weight": 1.0}]
    assert name in available_rewards() and name not in accuracy_rewards()
    assert accuracy_reward_names(specs) == []
    assert trainer_variance(specs) is None  # the weighted sum
    both = [{"name": name}, "math_accuracy"]
    assert accuracy_reward_names(both) == ["math_accuracy"]
    assert trainer_variance(both) == ["math_accuracy"]


def test_unregister_forgets_the_accuracy_mark(throwaway):
    name = throwaway("test_registry_again", accuracy=True)
    unregister(name)
    assert name not in available_rewards() and name not in accuracy_rewards()
    register(name)(lambda: _ones)  # the same name again, now without accuracy (the fixture unregisters it)
    assert name in available_rewards() and name not in accuracy_rewards()


def test_discovery_walks_subpackages_but_not_the_sandbox_or_the_worker(tmp_path):
    listed = ["a.py", "sub/__init__.py", "sub/b.py", "math/__init__.py", "math/worker.py", "math/pool.py"]
    for relative in [*listed, "code/__init__.py"]:
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text("raise AssertionError('listing must not import')\n")
    for relative in ["code/sandbox/__init__.py", "code/sandbox/launcher.py"]:
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text("")
    assert sorted(_reward_modules([str(tmp_path)], "rewards.")) == [
        "rewards.a",
        "rewards.code",
        "rewards.math",
        "rewards.math.pool",
        "rewards.sub",
        "rewards.sub.b",
    ]


def test_looking_up_a_reward_imports_neither_the_sandbox_launcher_nor_the_worker():
    script = (
        "import sys; import rewards; rewards.available_rewards(); "
        "print(sorted(m for m in sys.modules if m.startswith(('rewards.code.sandbox.', 'rewards.math.worker', 'sandbox_'))))"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    # The sandbox's caller side, imported by rewards.code.verifier as before the registry found the modules itself.
    expected = [
        f"rewards.code.sandbox.{name}"
        for name in ("cgroup", "entry_points", "leftovers", "process", "results", "root", "run", "seccomp", "settings")
    ]
    assert done.stdout.split("\n")[0] == repr(expected)
