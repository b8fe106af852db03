"""The adversarial math corpus for the tests: its reader lives beside the benchmark that also uses it, since
no script may import tests' code (tests/test_layering.py)."""

from scripts.bench.adversarial_corpus import CORPUS, build, load_corpus

__all__ = ["CORPUS", "build", "load_corpus"]
