"""Verifiers and rewards: the one definition of "correct" (which verifier scores a row: verdicts.py), the
reward registry (`from rewards import get_reward, build_rewards, available_rewards`) and the code sandbox.
May import: rewards only, none of the project's other packages (tests/test_layering.py checks).
"""

from rewards.registry import (
    ACCURACY_REWARDS,
    UnknownRewardError,
    accuracy_reward_names,
    available_rewards,
    build_rewards,
    get_reward,
    register,
)

__all__ = [
    "ACCURACY_REWARDS",
    "UnknownRewardError",
    "accuracy_reward_names",
    "available_rewards",
    "build_rewards",
    "get_reward",
    "register",
]
