"""Is this math completion correct? Answer extraction and verification, shared by every stage.

The GRPO reward, the pass-rate filter, rejection sampling and pass@k all call `verify`, so a training
signal and an evaluation number cannot disagree about what "correct" means.

* `extract_answer` takes the last `\\boxed{...}` / `\\fbox{...}` with balanced braces, looking only
  after a closing `</think>` when there is one (the reasoning may box intermediate results).
* `verify` compares numbers exactly (integers, decimals, fractions: `Fraction`, no rounding and no
  sympy) and hands anything else to math-verify with the gold answer first.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from fractions import Fraction

logger = logging.getLogger(__name__)

_BOX_OPEN = re.compile(r"\\(?:boxed|fbox)\s*\{")
_NUMBER = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)$")
_FRACTION = re.compile(r"^([+-]?)\\[dt]?frac\{(\d+)\}\{(\d+)\}$|^([+-]?\d+)/(\d+)$")
THINK_CLOSE = "</think>"


@dataclass(frozen=True)
class Verdict:
    """The verifier's decision on one completion.

    `correct` is None when the gold answer itself cannot be read: such a row cannot be scored and must
    never count as solved.
    """

    correct: bool | None
    extracted: str | None
    reason: str


def final_segment(text: str) -> str:
    """The part of a completion after its last `</think>`, or all of it when there is none."""
    cut = text.rfind(THINK_CLOSE)
    return text if cut < 0 else text[cut + len(THINK_CLOSE) :]


def boxed_contents(text: str) -> list[str]:
    """Contents of every `\\boxed{...}` / `\\fbox{...}` whose braces balance, in order of appearance."""
    found = []
    for match in _BOX_OPEN.finditer(text):
        depth, start = 1, match.end()
        for position in range(start, len(text)):
            char = text[position]
            if char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
                if depth == 0:
                    found.append(text[start:position])
                    break
    return found


def extract_answer(text: str | None) -> str | None:
    """The final boxed answer of a completion, stripped; None when there is none (or it is empty)."""
    if not text:
        return None
    boxed = boxed_contents(final_segment(text))
    if not boxed:
        return None
    answer = boxed[-1].strip()
    return answer or None


def parse_exact_number(text: str) -> Fraction | None:
    """An integer, a decimal or a simple fraction as an exact `Fraction`; None for anything else."""
    text = text.strip().replace(" ", "").replace("{,}", "").rstrip(".")
    if _NUMBER.match(text):
        return Fraction(text)
    match = _FRACTION.match(text)
    if match:
        if match.group(2) is not None:
            sign, numerator, denominator = match.group(1), match.group(2), match.group(3)
        else:
            sign, numerator, denominator = "", match.group(4), match.group(5)
        if int(denominator) == 0:
            return None
        value = Fraction(int(numerator), int(denominator))
        return -value if sign == "-" else value
    return None


def verify(gold: str, completion: str) -> Verdict:
    """Score one completion against a gold answer."""
    if gold is None or not str(gold).strip():
        return Verdict(None, None, "gold answer is empty")
    extracted = extract_answer(completion)
    if extracted is None:
        return Verdict(False, None, "no boxed answer")
    gold_number, answer_number = parse_exact_number(str(gold)), parse_exact_number(extracted)
    if gold_number is not None:
        if answer_number is not None:
            return Verdict(answer_number == gold_number, extracted, "exact number comparison")
    return _verify_with_math_verify(str(gold), extracted)


def _verify_with_math_verify(gold: str, extracted: str) -> Verdict:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse
    from math_verify import verify as math_verify

    # Gold goes in wrapped in $...$ so that bare LaTeX such as \frac12 parses (it parses to nothing otherwise).
    configs = [LatexExtractionConfig(), ExprExtractionConfig()]
    gold_parsed = parse(f"${gold}$", extraction_config=configs)
    if not gold_parsed:
        logger.warning("gold answer %r cannot be parsed; the row is not scored", gold)
        return Verdict(None, extracted, "gold answer cannot be parsed")
    answer_parsed = parse(f"${extracted}$", extraction_config=configs)
    if not answer_parsed:
        return Verdict(False, extracted, "answer cannot be parsed")
    return Verdict(bool(math_verify(gold_parsed, answer_parsed)), extracted, "math-verify")
