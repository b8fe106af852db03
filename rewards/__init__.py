"""Verifiers and rewards: the one definition of "correct" (which verifier scores a row: verdicts.py), the
reward registry (`from rewards import get_reward, build_rewards, available_rewards`), the math verifier
(rewards.math) and the code sandbox (rewards.sandbox).
May import: rewards only, none of the project's other packages (tests/test_layering.py checks).
"""

from rewards.registry import (
    UnknownRewardError,
    accuracy_reward_names,
    accuracy_rewards,
    available_rewards,
    build_rewards,
    get_reward,
    register,
)

__all__ = [
    "UnknownRewardError",
    "accuracy_reward_names",
    "accuracy_rewards",
    "available_rewards",
    "build_rewards",
    "get_reward",
    "register",
]
