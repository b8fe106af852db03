"""Verifiers and rewards: the one definition of "correct" (which verifier scores a row: verdicts.py), the
reward registry (`from rewards import get_reward, build_rewards, available_rewards`), and the rewards by kind of
verifier: the math verifier (rewards.math), the code verifier and its sandbox (rewards.code, rewards.code.sandbox),
learned rewards (rewards.learned: reward models, the LLM judge), shaping and control rewards (rewards.shaping).
May import: rewards and basics only, none of the project's other packages (tests/test_layering.py checks).
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
