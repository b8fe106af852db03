"""Verifiers and rewards: the one definition of "correct" that every stage of the pipeline uses.

    from rewards import get_reward, build_rewards, available_rewards

Imports none of the project's other packages.
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
