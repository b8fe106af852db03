"""The task layer: the row schema and its loaders (schema.py), the synthetic and arithmetic tasks, evaluation
sets by name (datasets.py, code_sets.py), text normalisation (text.py) and whether a Hub id can be had here
(hub.py): what eval, the filters and recipes read.
May import: tasks, rewards and basics only (tests/test_layering.py checks).
"""
