"""recipes/plot_curves.py's wing: the figure and the per-window table drawn from runs' logged records (figure.py)."""
