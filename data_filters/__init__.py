"""Data: the row schema and its loaders, the synthetic reasoning task, and (later) the filters."""
