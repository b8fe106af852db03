"""Sampling and scoring: the sampler backends, estimators such as pass@k, budgets, the evaluation runner
and `python -m eval.evaluate` / `eval.compare`.
May import: eval, tasks, rewards and basics only (tests/test_layering.py checks).
"""

from basics.venv_check import require_installed

require_installed(("torch", "transformers", "datasets", "math_verify"), "eval")
