"""Sampling and scoring: the sampler backends, estimators such as pass@k, budgets, the evaluation runner
and `python -m eval.evaluate` / `eval.compare`.
May import: eval, tasks and rewards only (tests/test_layering.py checks).
"""

from tasks.environment import require_installed

require_installed(("torch", "transformers", "datasets", "math_verify"), "eval")
