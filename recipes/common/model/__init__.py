"""The model a recipe starts from and the one it saves: a path or Hub id resolved, with one error when it is
neither, the model and tokenizer loaded and saved (loading.py), and the embedded default's tiny model, built on
the spot when a demo config names it (tiny.py; also the stand-ins of `--try_on_this_machine` and a fresh
distillation student)."""
