"""recipes/distill.py's wing: its options (arguments.py), the offline and on-policy stages (stages.py), and the
student: built, loaded or cut from the teacher (student.py, prune.py)."""
