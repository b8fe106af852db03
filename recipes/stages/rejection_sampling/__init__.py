"""recipes/rejection_sampling.py's wing: its options (arguments.py), a round and its files (rounds.py), and what a
rerun finds of a round, as a typed state (state.py)."""
