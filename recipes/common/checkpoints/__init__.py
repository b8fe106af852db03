"""A run's checkpoints: which `checkpoint-N` folders exist, which are whole and which to resume from (folders.py,
the one reader of their names), the one resume rule every recipe's training goes through (resume.py:
`train_resuming`, `finished_run`), and what a user is told on stopping a run and resuming it (interrupt.py)."""
