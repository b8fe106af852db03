"""One script per pipeline stage (sft.py, grpo.py, rejection_sampling.py, distill.py, reward_model.py) with its
YAML configs; each recipe's own code in its wing, recipes.stages.<recipe> (the GRPO trainer and its config in
recipes.stages.grpo); what two or more recipes use in recipes.common.
May import: recipes, data_filters, eval, tasks, rewards and basics; never scripts/ or tests/ (tests/test_layering.py checks).
"""

from basics.venv_check import require_installed

require_installed(("torch", "transformers", "trl", "peft", "accelerate", "datasets", "yaml"), "recipes")
