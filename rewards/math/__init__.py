"""Is this math completion correct? The verifier every stage shares, and the `math_accuracy` reward.

The GRPO reward, the pass-rate filter, rejection sampling and pass@k all call `verify` / `verify_batch`,
so a training signal and an evaluation number cannot disagree about what "correct" means.

Order of decisions for one completion:
1. extraction, after the last `</think>` (a reasoning that opens `<think>` and never closes it has no
   final answer): the boxes that state the final answer, by rewards.math.answers' rule: the last box
   and the boxes stated together with it; earlier boxes followed by more work are steps and do not count.
   Optional fallbacks, off by default: the last unboxed "the answer is X" / "Answer: X" statement, with
   hedged statements scoring 0 (rewards.math.statements);
2. anti-hacking, each with its reason: boxes stated together must all equal the gold *by value*, so
   "\\boxed{3} or \\boxed{4}" scores 0 whichever is right, while "\\boxed{-b+2}, or \\boxed{2 - b}" is
   one answer; alternatives inside one box when the gold is one value ("3 or 4", "41, 42, 43",
   "\\pm 2"), an empty or absurdly long answer, and look-alike (non-ASCII) digits are all incorrect;
   with `require_number` (per row, or for a whole batch), an answer to a gold that is a number must be a
   number literal, not an expression that evaluates to it (rewards.math.literal): `\\boxed{7+5}` for 12 is
   incorrect, "an expression, not a number" (checked after the comparison, so a wrong answer keeps its reason);
3. local decisions, in this process and without sympy (rewards.math.compare): exact numbers (integers,
   decimals, fractions, powers, factorials: rewards.math.exact; every AIME answer), multiple-choice letters,
   numerals in a base, rejections of a number against variables, several values or a constant far from
   it (rewards.math.approx), and an answer written as a gold known to parse (a gold's first real comparison
   tells, once per gold);
4. everything else goes to math-verify (gold first, LaTeX wrapped in `$...$`) in worker processes with a
   hard deadline per item (rewards.math.pool), through a cache keyed on (gold, answer).

A gold is scored only when it parses *as a whole* once tidied (rewards.math.answers.tidy: `\\phantom`,
trailing punctuation, a `\\text{}` wrapper, a unit in words); otherwise `correct=None` with the reason,
never a comparison with a fragment of it (math-verify alone reads `2007 + \\frac\\pi 2` as "2").
An equation between two constants (`0.56 = 56\\%`) is compared side by side; other equations go to
math-verify, which compares both sides, or the right side when the left is a lone variable.

The package's modules by job: extract.py (the final answer), checks.py (the decisions before any comparison, and
the Verdict), verify.py (the comparisons and the verdicts of a batch), reward.py (`math_accuracy`), besides
answers.py, statements.py, literal.py, compare.py, exact.py, approx.py, pool.py and worker.py named above.
"""

from rewards.math.checks import MAX_ANSWER_CHARS, MAX_STATED, Verdict
from rewards.math.compare import answer_key
from rewards.math.extract import THINK_CLOSE, THINK_OPEN, boxed_answers, extract_answer, final_segment
from rewards.math.reward import make_math_accuracy, math_accuracy, row_require_number
from rewards.math.verify import DEFAULT_TIMEOUT_S, STARTUP_WAIT_S, per_completion, start_workers, verify, verify_batch

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "MAX_ANSWER_CHARS",
    "MAX_STATED",
    "STARTUP_WAIT_S",
    "THINK_CLOSE",
    "THINK_OPEN",
    "Verdict",
    "answer_key",
    "boxed_answers",
    "extract_answer",
    "final_segment",
    "make_math_accuracy",
    "math_accuracy",
    "per_completion",
    "row_require_number",
    "start_workers",
    "verify",
    "verify_batch",
]
