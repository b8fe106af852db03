"""What the recipes' training runs share besides the resume rule (recipes.common.checkpoints): the one SFT run
(sft_step.py: the cold start, each round of rejection sampling, distillation's student), the monitor every
trainer is given (monitor.py: metrics.jsonl written and read back, the collapse and reward-hacking warnings) and
the libraries' warnings silenced before a model is loaded or saved (library_noise.py)."""
