"""'Did you mean ...?': the nearest known name to a misspelled one, written once for every message that offers it
(reward names and their parameters, recipe options and flags, eval's flags, sampling options, plotted metrics).

It lives in the lowest layer because the reward registry needs it; every layer above imports it from here.
difflib finds the closest spelling; dashes and underscores count alike (`--top_p` is `--top-p`); a word with no
close spelling that abbreviates exactly one name gets that name (abbreviations are never taken, but they
deserve the full name).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable

CUTOFF = 0.75  # difflib's similarity a misspelling must reach; 0.6 (difflib's default) for short names


def nearest_name(word: str, known: Iterable[str], cutoff: float = CUTOFF) -> str | None:
    """The known name `word` most likely meant, spelled as `known` spells it, or None."""
    by_key = {str(name).replace("_", "-"): str(name) for name in known}
    key = str(word).replace("_", "-")
    close = difflib.get_close_matches(key, list(by_key), n=1, cutoff=cutoff)
    if not close:
        close = [name for name in by_key if name.startswith(key)]
    return by_key[close[0]] if len(close) == 1 else None


def did_you_mean(
    words: Iterable[str],
    known: Iterable[str],
    cutoff: float = CUTOFF,
    quote: bool = False,
    render: Callable[[str, str], str] | None = None,
) -> str:
    """'did you mean X?' (one word), 'did you mean X for a, Y for b?' (several), '' when no word has a near name.
    `quote` writes names as Python literals ('x'); `render(word, match)` spells a match as the user would have."""
    words, known = list(words), list(known)
    pairs = []
    for word in words:
        match = nearest_name(word, known, cutoff)
        if match is not None:
            shown = render(word, match) if render else match
            pairs.append((word, repr(shown) if quote else shown))
    if not pairs:
        return ""
    if len(words) == 1:
        return f"did you mean {pairs[0][1]}?"
    return "did you mean " + ", ".join(f"{match} for {word}" for word, match in pairs) + "?"


def unknown_names_message(unknown: list[str], known: Iterable[str], kind: str) -> str:
    """'unknown <kind>(s) 'x'; did you mean 'y'? (known: a, b, c)'."""
    known = list(known)
    hint = did_you_mean(unknown, known, quote=True)
    listed = ", ".join(repr(name) for name in unknown)
    return f"unknown {kind}(s) {listed}{'; ' + hint if hint else ''} (known: {', '.join(known)})"
