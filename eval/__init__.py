"""Sampling and scoring: the sampler backends, estimators such as pass@k, and the evaluation runner."""
