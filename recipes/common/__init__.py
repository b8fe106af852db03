"""What two or more recipes use, by job: the command line (command_line/), checkpoints and the resume rule
(checkpoints/), the model loaded, saved and, for the demo, built (model/), the SFT step and the monitor
(training/), data conversion, run cards, cached steps' fingerprints, the held-out evaluation, the
sample -> verify -> keep rule (traces/), and the private names of TRL and transformers reached (trl_private.py).
What one recipe alone runs is that recipe's wing (recipes.stages); tests/test_architecture.py counts the recipes
that import each module or package here directly."""
