"""What the command lines of eval, data_filters and scripts share with the recipes' parser.

The recipes parse with TRL's parser, which takes `--top_p` and `--top-p` alike; these argparse command
lines took only the dashed spelling. `FlagParser` takes both, so one habit works everywhere, and
`check_model` says in one line why a model cannot be loaded (instead of transformers' long text).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path


class UserInputError(ValueError):
    """A flag, path or file given by the user is wrong; the message says which and how to fix it."""


class FlagParser(argparse.ArgumentParser):
    """An ArgumentParser that accepts `--max_new_tokens` for `--max-new-tokens` (and `--a_b=1`)."""

    def parse_known_args(self, args=None, namespace=None):
        import sys

        args = list(sys.argv[1:] if args is None else args)
        known = {option for action in self._actions for option in action.option_strings}
        rewritten = []
        for token in args:
            if token == "--":  # everything after it is positional
                rewritten += args[len(rewritten) :]
                break
            name, sep, value = token.partition("=")
            dashed = name.replace("_", "-")
            if name.startswith("--") and name not in known and dashed in known:
                token = dashed + sep + value
            rewritten.append(token)
        return super().parse_known_args(rewritten, namespace)


def check_model(name_or_path: str) -> None:
    """Raise UserInputError when `name_or_path` is neither a saved model folder nor a Hub model we can reach."""
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file() and not (path / "adapter_config.json").is_file():
            raise UserInputError(
                f"model {name_or_path!r} is a folder without config.json, not a model saved with save_pretrained; "
                "give the folder a trainer saved (its output_dir)"
            )
        return
    parts = name_or_path.split("/")
    hub_like = len(parts) == 2 and all(parts) and not name_or_path.startswith((".", "/", "~"))
    if not hub_like:
        raise UserInputError(
            f"model {name_or_path!r} not found: no such folder, and not a Hub id 'org/name'; give a folder saved "
            "with save_pretrained or a Hub id"
        )
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
        from huggingface_hub import try_to_load_from_cache

        if not isinstance(try_to_load_from_cache(name_or_path, "config.json"), str):
            raise UserInputError(
                f"Hub model {name_or_path!r} is not in the local cache and HF_HUB_OFFLINE is set; download it where "
                f"the Hub is reachable (hf download {name_or_path}) or give a local folder"
            )
