"""The task layer: the row schema and its loaders (schema.py), the synthetic and arithmetic tasks, evaluation
sets by name (datasets.py, code_sets.py) and text normalisation (text.py): what eval, the filters and recipes read.
May import: tasks and rewards only (tests/test_layering.py checks).
"""
