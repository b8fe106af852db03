"""Text normalisation shared by the filters and the recipes: the keys under which two questions (or two
traces) count as the same text. Deduplication, decontamination and rejection sampling's keep rule all
compare through these, so "the same question" means one thing everywhere.
"""

from __future__ import annotations

import re
import unicodedata

_LATEX_SPACING = re.compile(r"\\(?:(?:left|right|displaystyle|q?quad)(?![a-zA-Z])|[,;:! ])|\$")
_WHITESPACE = re.compile(r"\s+")


def normalized_text(text: str) -> str:
    """NFKC, case-folded, `$` and LaTeX spacing removed, then every run of whitespace removed."""
    text = unicodedata.normalize("NFKC", text or "").casefold()
    return _WHITESPACE.sub("", _LATEX_SPACING.sub(" ", text))


def normalize_words(text: str) -> list[str]:
    """Lower-cased, whitespace-split words: the unit of n-gram comparison (non-text becomes no words)."""
    return text.lower().split() if isinstance(text, str) else []
