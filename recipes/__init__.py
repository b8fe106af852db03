"""One script per pipeline stage (sft.py, ...) with its YAML configs; shared helpers in recipes.common."""
