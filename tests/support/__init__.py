"""Helpers for the tests (not tests themselves)."""
