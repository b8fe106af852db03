"""One script per pipeline stage (sft.py, grpo.py, rejection_sampling.py, distill.py) with its YAML configs;
helpers shared by the recipes (configs, models, the training seam) in recipes.common; the RL trainers, each
with its config, in recipes.trainers.
May import: recipes, data_filters, eval, tasks and rewards; never scripts/ or tests/ (tests/test_layering.py checks).
"""

from tasks.environment import require_installed

require_installed(("torch", "transformers", "trl", "peft", "accelerate", "datasets", "yaml"), "recipes")
