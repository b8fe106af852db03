"""A math-verify worker process: reads (gold, answer) pairs as JSON lines on stdin, writes verdicts on stdout.

Started by rewards.math.pool, never by hand. math-verify's own timeouts use `signal.alarm`, which only
works in the main thread and still lets one expression cost seconds; here they are switched off and the
parent enforces a hard deadline per item by killing this process, which is why it runs alone.
"""

from __future__ import annotations

import json
import re
import sys

MEMORY_LIMIT_BYTES = 3 * 1024**3  # a sympy blow-up fails here with MemoryError instead of eating the machine


WARM_UP = [  # one of each common kind of answer: radicals, pi, tuples, matrices, intervals, degrees, equations
    ("\\frac{\\sqrt{5} - 1}{2}", "8"),
    ("-\\frac{\\pi}{3}", "\\frac{\\pi}{3}"),
    ("(91,60)", "(91, 61)"),
    ("\\begin{pmatrix} -5 \\\\ 9 \\end{pmatrix}", "\\begin{pmatrix} -5 \\\\ 8 \\end{pmatrix}"),
    ("(-\\infty, 3]", "[2, 3)"),
    ("30^\\circ", "31^\\circ"),
    ("y = 2x + 1", "y = 2x + 2"),
    ("x^2 + 1", "1 + x^{2}"),
    ("\\{1, 2\\}", "1, 2"),
    ("2 + 3i", "2 - 3i"),
]
_DELIMITED = re.compile(r"(?<!\\)\$|\\\(|\\\[|\\boxed")  # an unescaped $, \( or \[, or a box


def wrap_latex(text: str) -> str:
    """Put bare LaTeX between dollars: math-verify's LaTeX extractor parses `\\frac12` to nothing otherwise.
    (`\\$1.65` is bare LaTeX too: its dollar is a currency sign.)"""
    return text if _DELIMITED.search(text) else f"${text}$"


def _limit_memory() -> None:
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    except (ImportError, ValueError, OSError):  # not on Linux, or a lower hard limit already set
        pass


def _send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    _limit_memory()
    try:
        import logging

        from latex2sympy2_extended.math_normalization import NormalizationConfig
        from math_verify import LatexExtractionConfig, parse, verify

        logging.getLogger("math_verify").setLevel(logging.ERROR)  # the "timeout disabled" notice is expected here
    except Exception as error:  # report why, so the parent can say it instead of timing out
        _send({"fatal": f"cannot import math_verify: {error!r}"})
        return
    # LaTeX only, without math-verify's unit stripping: its expression fallback reads the last number of a
    # text it cannot parse ("2" of `2007 + \\frac\\pi 2`), and its unit list eats letters ("2s" -> 2,
    # "a + b + c" -> nothing). rewards.math.answers.tidy removes units written in words before this.
    normalization = NormalizationConfig(
        basic_latex=True, units=False, malformed_operators=True, nits=True, boxed="all", equations=False
    )
    configs = [LatexExtractionConfig(normalization_config=normalization)]
    golds: dict[str, tuple[list, str | None]] = {}  # the same gold comes with every sample of a problem

    def parse_gold(text: str) -> tuple[list, str | None]:
        # A gold is readable when it parses to a math object ("no_fallback"); "???" or "\begin{}" would
        # otherwise come back as a raw string that a completion could match by copying it.
        if text not in golds:
            if len(golds) > 10_000:
                golds.clear()
            try:
                strict = parse(
                    wrap_latex(text), extraction_config=configs, fallback_mode="no_fallback", parsing_timeout=None
                )
                parsed = parse(wrap_latex(text), extraction_config=configs, parsing_timeout=None) if strict else []
                golds[text] = (parsed, None)
            except Exception as error:
                golds[text] = ([], f"{type(error).__name__}: {str(error)[:200]}")
        return golds[text]

    # Warm up: sympy builds its caches and imports parts of itself on first use, which costs the first
    # comparisons of each kind 0.1-0.5 s; paying it here keeps it off the first training step's items.
    for gold_text, answer_text in WARM_UP if "--no-warm-up" not in sys.argv else []:
        try:
            verify(
                parse_gold(gold_text)[0],
                parse(wrap_latex(answer_text), extraction_config=configs),
                timeout_seconds=None,
            )
        except Exception:  # noqa: BLE001 - a warm-up failure only costs speed
            pass
    _send({"ready": True})
    for line in sys.stdin:
        task = json.loads(line)
        # MemoryError, RecursionError, sympy internals: each becomes a verdict with its reason, never a crash.
        gold, gold_error = parse_gold(task["gold"])
        if not gold:
            _send({"gold_ok": False, "equal": False, "error": gold_error})
            continue
        if task["answer"] == task["gold"]:  # the gold checked against itself: it parses, so it is equal
            _send({"gold_ok": True, "equal": True, "answer_ok": True})
            continue
        try:
            answer = parse(wrap_latex(task["answer"]), extraction_config=configs, parsing_timeout=None)
            equal = bool(answer) and bool(verify(gold, answer, timeout_seconds=None))
            _send({"gold_ok": True, "equal": equal, "answer_ok": bool(answer)})
        except Exception as error:
            _send({"gold_ok": True, "equal": False, "error": f"{type(error).__name__}: {str(error)[:200]}"})


if __name__ == "__main__":
    main()
