"""recipes/grpo.py's wing: its options (arguments.py), the trainer it trains with, as TRL keeps a trainer
(config.py: RLVRGRPOConfig, trl.GRPOConfig plus the trainer's options; trainer.py: RLVRGRPOTrainer), what the
trainer adds in one module each (dynamic_sampling.py, checkpoint_state.py, shared_prompt.py,
compact_generation.py, zero_advantage.py, gold.py, step_timing.py), and setup.py, which builds the trainer as
the recipe trains it. A new loss variant or trainer is a new module here."""
