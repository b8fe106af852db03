"""recipes/sft.py's wing: its options (arguments.py). The SFT step itself is shared (recipes.common.training.sft_step)."""
