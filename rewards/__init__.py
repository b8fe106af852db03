"""Verifiers and rewards: the one definition of "correct" that every stage of the pipeline uses.

Imports none of the project's other packages.
"""
