"""What the command lines of eval, data_filters and scripts share with the recipes' parser.

The recipes parse with TRL's parser, which takes `--top_p` and `--top-p` alike; these argparse command
lines took only the dashed spelling. `FlagParser` takes both, so one habit works everywhere; like the
recipes, it says a mistake in one line (`error: ...`, exit code 2) with the nearest option for a misspelled
flag, instead of the whole usage block, and takes no abbreviations (`--temp` is not `--temperature`: a prefix
silently taken is a typo nobody sees). `check_model` says in one line why a model cannot be loaded (instead
of transformers' long text).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from basics.did_you_mean import did_you_mean
from tasks.hub import hub_problem


class UserInputError(ValueError):
    """A flag, path or file given by the user is wrong; the message says which and how to fix it."""


class FlagParser(argparse.ArgumentParser):
    """An ArgumentParser that accepts `--max_new_tokens` for `--max-new-tokens` (and `--a_b=1`), takes no
    abbreviations, and reports a mistake in one line with exit code 2."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        """One line on stderr (`error: ...`), exit code 2: the usage block hid the message under 30 lines."""
        sys.stderr.write(f"error: {message} (see --help)\n")
        raise SystemExit(2)

    def parse_args(self, args=None, namespace=None):
        namespace, extras = self.parse_known_args(args, namespace)
        if extras:
            self.error(self.unknown_message(extras))
        return namespace

    def unknown_message(self, extras: list[str]) -> str:
        """'unrecognized arguments: --temprature 0.5; did you mean --temperature?' (in the user's spelling)."""
        known = sorted({option for action in self._actions for option in action.option_strings})
        flags = [token.partition("=")[0] for token in extras if token.startswith("--")]
        hint = did_you_mean(flags, known, render=_in_users_spelling)
        message = f"unrecognized arguments: {' '.join(extras)}"
        return f"{message}; {hint}" if hint else message

    def parse_known_args(self, args=None, namespace=None):
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
    problem = hub_problem(name_or_path, "model")
    if problem:
        raise UserInputError(problem)


def _in_users_spelling(flag: str, match: str) -> str:
    """`--max_new_tokens` was typed: offer `--max_new_tokens`'s neighbour with underscores too."""
    underscored = "_" in flag and "-" not in flag[2:]
    return "--" + match[2:].replace("-", "_") if underscored else match
