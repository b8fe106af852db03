"""Question types that a verifiable reward cannot train well: tag them, or drop them.

Kimi k1.5 drops multiple-choice, true/false and proof questions: with 4-5 options a policy is paid for a
guess one time in four, and RL learns to guess; a proof has no single value a verifier can check. The
detectors here read the question (and the gold answer) and return the types found:

- `multiple_choice`: lettered options in sequence, (A) (B) (C) ... or A. B. C. or A) B) C), in plain text
  or LaTeX (`\\textbf{(A)}`, `\\text{(B) }`), numbered options (1) (2) (3) with a choice cue, "which of the
  following", or a gold answer that is an option letter ("(C)", "\\text{B}", "A, C");
- `true_false` and `yes_no`: a gold answer of true/false or yes/no, or a question that asks for one;
- `proof`: "prove that", "show that" and kin as an instruction ("Show that", "..., and prove that"), not
  as a verb in a sentence ("will the census show that");
- `unverifiable_answer`: no gold answer, a gold that names a proof ("proof", "see solution"), free text
  (two or more words and no number, e.g. "\\text{two lines}"), or an answer too long to be one value.

Figures drawn with Asymptote (`[asy] ... [/asy]`) are cut before reading: their labels ("A", "B", ...)
look like options.
"""

from __future__ import annotations

import logging
import re
import time
from collections import Counter
from collections.abc import Iterable

from data_filters.report import StepReport, check_mode, without_rows
from rewards.verdicts import DEFAULT_VERIFIER, verifier_of
from tasks.rows import question_text, set_column

logger = logging.getLogger(__name__)

TYPES = ("multiple_choice", "true_false", "yes_no", "proof", "unverifiable_answer")
MAX_ANSWER_CHARS = 200  # longer than any single value in MATH/AIME/AMC golds except big matrices (~150)

_ASY = re.compile(r"\[asy\].*?(?:\[/asy\]|$)", re.DOTALL | re.IGNORECASE)
# LaTeX that only formats option labels; removed so "\textbf{(A)}\ 2" reads "(A) 2".
_FORMATTING = re.compile(r"\\(?:textbf|text|mathrm|mathbf|textit|mbox)\b|\\q?quad\b|\\[ ,;:!]|[{}$~]")
_LETTER_MARK = re.compile(r"(?:(?<=\s)|^)(?:\(([A-H])\)|([A-H])\)\.?|([A-H])\.)(?=\s|$)")
_LOWER_MARK = re.compile(r"(?:(?<=\s)|^)\(([a-h])\)(?=\s)")  # (a) (b) (c): conditions as often as options
_NUMBER_MARK = re.compile(r"(?:(?<=\s)|^)\(([1-9])\)(?=\s)")
_WHICH_OF = re.compile(r"\bwhich\s+(?:one\s+)?of\s+the\s+following\b", re.IGNORECASE)
_CHOICE_CUE = re.compile(r"\b(?:which\s+of|choose|select|options?|choices?|correct\s+answer)\b", re.IGNORECASE)
_LETTER_CUE = re.compile(r"\b(?:which|letters?|choose|select|options?|choices?|correct\s+answer)\b", re.IGNORECASE)
_OPTION_ANSWER = re.compile(r"^\(?[A-H]\)?(?:\s*(?:,|and)\s*\(?[A-H]\)?)*$")
_TRUE_FALSE_ASK = re.compile(r"\btrue\s+or\s+false\b|\(\s*true\s*/\s*false\s*\)|\bT\s*/\s*F\b", re.IGNORECASE)
_YES_NO_ASK = re.compile(r"\byes\s+or\s+no\b|\(\s*yes\s*/\s*no\s*\)", re.IGNORECASE)
# An instruction to prove: at the start of a sentence or clause, or after a linking word.
_PROOF = re.compile(
    r"(?:^|[.!?:;]\s*|\n\s*|,\s*|\b(?:and|then|hence|thus|please|to)\s+)"
    r"(?:prove|show|demonstrate|verify|justify)\s+(?:that|why|rigorously)\b"
    r"|(?:^|[.!?:;]\s*|\n\s*)prove\b|\bprove\s+or\s+disprove\b",
    re.IGNORECASE,
)
_PROOF_ANSWER = re.compile(r"^(?:proof|qed|see\s+(?:the\s+)?(?:solution|proof|above|below))\.?$", re.IGNORECASE)
_NO_ANSWER = re.compile(r"^(?:n/?a|tbd|\?+|-+)$", re.IGNORECASE)
_LATEX_COMMAND = re.compile(r"\\(?:begin|end)\{[a-z*]+\}|\\[a-zA-Z]+")


def _plain(text: str) -> str:
    """The question without figures and without the LaTeX that only dresses up option labels."""
    return _FORMATTING.sub(" ", _ASY.sub(" ", text))


def _bare_answer(answer: str) -> str:
    """An answer without $, \\text{} wrappers and braces: "\\text{(C)}" -> "(C)", "\\text{ Yes }" -> "Yes"."""
    return " ".join(_FORMATTING.sub(" ", answer).split()).strip(" .")


def _has_option_sequence(marks: Iterable[str], first: str, length: int) -> bool:
    """Whether `marks` (in text order) contain `first`, its successor, ... `length` labels in order."""
    wanted = [chr(ord(first) + step) for step in range(length)]
    position = 0
    for mark in marks:
        if mark == wanted[position]:
            position += 1
            if position == length:
                return True
    return False


def is_multiple_choice(question: str, answer: str | None = None) -> bool:
    plain = _plain(question)
    letters = [next(group for group in match.groups() if group).upper() for match in _LETTER_MARK.finditer(plain)]
    if _has_option_sequence(letters, "A", 3):
        return True
    numbers = [match.group(1) for match in _NUMBER_MARK.finditer(plain)]
    if _has_option_sequence(numbers, "1", 3) and _CHOICE_CUE.search(plain):
        return True
    if _WHICH_OF.search(plain):
        return True
    bare = _bare_answer(answer) if isinstance(answer, str) else ""
    if not (bare and _OPTION_ANSWER.match(bare)):
        return False
    # the gold is an option letter: options labelled any way, or a question that asks for a letter
    lower = [match.group(1).upper() for match in _LOWER_MARK.finditer(plain)]
    return len(letters) >= 2 or _has_option_sequence(lower, "A", 3) or bool(_LETTER_CUE.search(plain))


def is_true_false(question: str, answer: str | None = None) -> bool:
    bare = _bare_answer(answer).lower() if isinstance(answer, str) else ""
    return bare in ("true", "false") or bool(_TRUE_FALSE_ASK.search(question))


def is_yes_no(question: str, answer: str | None = None) -> bool:
    bare = _bare_answer(answer).lower() if isinstance(answer, str) else ""
    return bare in ("yes", "no") or bool(_YES_NO_ASK.search(question))


def is_proof(question: str, answer: str | None = None) -> bool:
    if isinstance(answer, str) and _PROOF_ANSWER.match(_bare_answer(answer)):
        return True
    return bool(_PROOF.search(_ASY.sub(" ", question)))


def is_unverifiable_answer(answer) -> bool:
    """No single value a verifier can check: missing, a proof marker, free text, or far too long."""
    if answer is None or not str(answer).strip():
        return True
    answer = str(answer)
    if len(answer) > MAX_ANSWER_CHARS:
        return True
    bare = _bare_answer(answer)
    if _PROOF_ANSWER.match(bare) or _NO_ANSWER.match(bare):
        return True
    # free text: words, and neither a digit nor an operator ("-(ab + ac + bc)" is math, "two lines" is not)
    words = re.findall(r"[A-Za-z]{3,}", _LATEX_COMMAND.sub(" ", answer))
    return len(words) >= 2 and not re.search(r"[\d+\-*/^=<>_|]", bare)


_DETECTORS = {
    "multiple_choice": is_multiple_choice,
    "true_false": is_true_false,
    "yes_no": is_yes_no,
    "proof": is_proof,
    "unverifiable_answer": lambda question, answer: is_unverifiable_answer(answer),
}


def question_types(question: str, answer: str | None = None, verifier: str = DEFAULT_VERIFIER) -> list[str]:
    """The types found in one question, in the order of TYPES. Code rows are checked for proofs only: their
    "answer" is a test suite, and options in a programming task are data, not choices."""
    if verifier == "code":
        return ["proof"] if is_proof(question) else []
    return [name for name, detect in _DETECTORS.items() if detect(question or "", answer)]


def filter_question_types(
    dataset,
    drop_types: Iterable[str] = TYPES,
    mode: str = "drop",
    question_field: str = "problem",
    progress: bool = True,
):
    """Drop rows of the `drop_types` types, or (tag mode) keep every row and add a `question_types` column.
    Returns `(dataset, StepReport)`; the report counts every type found, dropped or not."""
    check_mode(mode, "question_type")
    drop_types = list(drop_types)
    unknown = sorted(set(drop_types) - set(TYPES))
    if unknown:
        raise ValueError(f"question_type: unknown type(s) {unknown}; known: {', '.join(TYPES)}")
    from tqdm.auto import tqdm

    started = time.perf_counter()
    columns = [c for c in ("prompt", "messages", question_field, "answer", "verifier") if c in dataset.column_names]
    types = [
        question_types(question_text(row, question_field), row.get("answer"), verifier_of(row))
        for row in tqdm(dataset.select_columns(columns), desc="question types", unit="row", disable=not progress)
    ]
    found = Counter(name for row_types in types for name in row_types)
    flagged = [index for index, row_types in enumerate(types) if set(row_types) & set(drop_types)]
    if mode == "drop":
        result = without_rows(dataset, flagged)
    else:
        result = set_column(dataset, "question_types", types, "string", is_list=True)
    reasons = {name: found[name] for name in TYPES if name in drop_types and found[name]}
    details = {"types found (dropped or not)": {name: found[name] for name in TYPES}, "drop_types": drop_types}
    report = StepReport.timed("question_type", dataset, result, mode, len(flagged), reasons, started, details=details)
    logger.info("question_type: %d of %d rows of types %s", len(flagged), len(dataset), reasons)
    return result, report
