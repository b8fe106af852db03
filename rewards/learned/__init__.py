"""Learned rewards: models that score completions, as entries of the reward registry.

- reward_models.py: the `reward_model` reward (sequence-classification reward models, one or an ensemble), and
  what the LLM judge shares with it: checking and loading a model folder, a Hub id or a LoRA adapter folder;
- llm_judge.py: the `llm_judge` reward, a causal LM asked whether the final answer equals the reference.
"""
