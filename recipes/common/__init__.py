"""Helpers shared by the recipes: config parsing, model loading, data conversion, run cards, the tiny model."""
