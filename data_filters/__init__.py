"""Data: the row schema and its loaders, the synthetic reasoning task, the filters (dedup, question type,
decontamination, pass rate, Qwen3's no-thinking rule), the curriculum sampler, and the filter pipeline
(`python -m data_filters --config FILE.yaml`).

This package's __init__ imports nothing: eval/ loads its datasets through data_filters.schema, and the
filters import eval/, so anything imported here could close a cycle (tests/test_layering.py checks).
"""
