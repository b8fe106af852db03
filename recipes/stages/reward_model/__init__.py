"""recipes/reward_model.py's wing: its options and preference pairs (pairs.py), the policy's samples, the ORM's
training and its measures (training.py)."""
