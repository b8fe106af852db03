"""The RL algorithms the recipes train with, one trainer a module with its config beside it, as TRL keeps them.

grpo.py: `RLVRGRPOConfig` (trl.GRPOConfig plus this trainer's own options) and `RLVRGRPOTrainer` (TRL's
GRPOTrainer with dynamic sampling, the curriculum, step timing and cheaper rollouts), which reads every option
from its config; beside it dynamic_sampling.py (DAPO's three modes), shared_prompt.py (a group's prompt run
once in the loss pass), decoding.py (compact generation and trimmed micro-batches), gold.py (gold rewards
logged beside the training reward) and monitor.py (the metrics.jsonl callback, its collapse warnings and its
reward-hacking check). A new loss variant or trainer is a new module here.
May import: recipes (recipes.common for what every recipe shares), data_filters, eval, tasks and rewards.
"""
