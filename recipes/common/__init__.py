"""Helpers shared by the recipes: config parsing, model loading, data conversion, run cards, checkpoints, the tiny
model. No RL algorithm: the trainers and their configs are recipes.trainers' (tests/test_trainers.py checks)."""
