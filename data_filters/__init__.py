"""The filters (dedup, question type, decontamination, pass rate, Qwen3's no-thinking rule), the curriculum
sampler and the filter pipeline (`python -m data_filters --config FILE.yaml`).
May import: data_filters, eval, tasks, rewards and basics only (tests/test_layering.py checks).
"""
