"""Reading answers out of math text: the boxes of a completion, which of them state its final answer, and
the tidying that makes a gold or an answer parse as a whole.

The final answer (rewards.math relies on this rule, and tests/test_math_solutions.py checks it on real
written solutions):

* a box is `\\boxed{}`, `\\fbox{}` or `\\framebox{}` with balanced braces, outside Asymptote code
  (`[asy]...[/asy]` labels are drawings) and not empty once `\\phantom{}` spacers are removed (long
  divisions box `\\phantom{09}`);
* the final answer is the last box together with the boxes that are *stated with it*: walking back from
  the last box, an earlier box joins it while the text in between is only a short connective ("or",
  "and", ", then", "i.e.", a label such as `k =` or `g(x) =`). Math work in between (a digit, an
  operator, a LaTeX command, an equation chain) or a sentence of prose (six words or more) means the
  earlier box was a step of the reasoning (an interim `\\boxed{144}`, `\\log_2 4 = \\boxed{2}`, a
  "Claim 1" box), and it is not part of the answer;
* rewards.math then compares the answer *by value*: boxes stated together must all equal the gold
  (`\\boxed{-b+2}`, or `\\boxed{2 - b}`), so two different values stated together ("\\boxed{3} or
  \\boxed{4}") are a hedge and score 0, whichever of them is right.

Why this cannot be gamed: whatever the earlier boxes say, the reward is never more than the last box
alone would earn. Boxing every candidate value in turn gains nothing (only the last can count), and
stating several at the end scores 0. A gold that lists several values is compared with the boxes stated
together as one list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

BOX_OPEN = re.compile(r"\\(?:boxed|fbox|framebox)\s*\{")
_BRACE = re.compile(r"[{}]")
_ASY = re.compile(r"\[asy\]|\[/asy\]|\\begin\{asy\}|\\end\{asy\}")
_PHANTOM = re.compile(r"\\[hv]?phantom\s*")
_SQRT_PAREN = re.compile(r"\\sqrt\s*\(")
_UNBRACED_FRAC = re.compile(r"\\([dt]?frac)\s*(\\[a-zA-Z]+|[0-9a-zA-Z])\s*(\\[a-zA-Z]+|[0-9a-zA-Z]|\{)")
_TEXT_WRAPPER = re.compile(r"^\\(?:text|textbf|textrm|textnormal|mathrm|mathbf|mbox)\s*\{")
# A trailing unit in words: "10\text{ cm}", "15\mbox{ cm}^2", "1.85\ \text{USD}", "240\text{ ways.}".
_UNIT = re.compile(
    r"(?:\\[ ,;!]|\s)*\\(?:text|textrm|textnormal|textbf|mbox)\s*\{\s*[A-Za-z][A-Za-z .]*\}(?:\^\{?[23]\}?)?\s*$"
)
_LEADING_RELATION = re.compile(r"^(?:\\approx|\\sim|=)(?![a-zA-Z])\s*")
_TEXT_TOKEN = re.compile(r"\\text\s*\{([A-Za-z0-9]+)\}")
_TRAILING_PUNCTUATION = re.compile(r"(?:\s|\\[ ,;!]|[.,;:])+$")
# A label before a box: "k =", "g(x)=", "\theta =", "x_1 =".
_LABEL = re.compile(r"(?:[A-Za-z]|\\[a-zA-Z]+)(?:_\{?[A-Za-z0-9]+\}?)?(?:\([A-Za-z]\))?\s*(?:=|\\approx)\s*$")
_FORMATTING = re.compile(
    r"\\(?:text|textbf|textit|emph|mbox|mathrm|quad|qquad|left|right|displaystyle)(?![a-zA-Z])"
    r"|\\[()\[\] ,;!]|\\\\|\$|[{}]"
)
_WORK = re.compile(r"[0-9=<>+^_*/|]|\\[a-zA-Z]")
_WORD = re.compile(r"[A-Za-z]+")
PROSE_WORDS = 6  # a gap of this many words is a sentence of reasoning, not a connective


@dataclass(frozen=True)
class Box:
    start: int  # position of the backslash
    end: int  # position after the closing brace
    content: str


def matching_braces(text: str) -> dict[int, int]:
    """Position of each `{` -> position of its matching `}`, in one pass (linear even for 1 MB of braces)."""
    matches, stack = {}, []
    for match in _BRACE.finditer(text):
        if match.group() == "{":
            stack.append(match.start())
        elif stack:
            matches[stack.pop()] = match.start()
    return matches


def find_boxes(text: str) -> list[Box]:
    """The outermost boxes with balanced braces, in order; a box that only wraps another box is unwrapped
    (`\\boxed{\\boxed{5}}` gives "5"). Linear in the text, whatever the nesting depth."""
    matches = None
    found, covered_until = [], -1
    for match in BOX_OPEN.finditer(text):
        if match.start() < covered_until:
            continue  # inside the previous box
        if matches is None:
            matches = matching_braces(text)
        close = matches.get(match.end() - 1)
        if close is None:
            continue  # unbalanced: not an answer
        covered_until = close
        start, end = match.end(), close
        while True:  # unwrap \\boxed{\\boxed{...}}, using the positions already matched
            first = start
            while first < end and text[first].isspace():
                first += 1
            inner = BOX_OPEN.match(text, first, end)
            inner_close = matches.get(inner.end() - 1) if inner else None
            if inner_close is None or text[inner_close + 1 : end].strip():
                break
            start, end = inner.end(), inner_close
        found.append(Box(match.start(), close + 1, text[start:end].strip()))
    return found


def _asy_spans(text: str) -> list[tuple[int, int]]:
    spans, opened = [], None
    for match in _ASY.finditer(text):
        closing = match.group().startswith(("[/", "\\end"))
        if not closing and opened is None:
            opened = match.start()
        elif closing and opened is not None:
            spans.append((opened, match.end()))
            opened = None
    if opened is not None:
        spans.append((opened, len(text)))
    return spans


def remove_phantoms(text: str) -> str:
    """`\\phantom{09}` and `\\phantom -` take room but show nothing: drop them with their argument."""
    if "phantom" not in text:
        return text
    out, position = [], 0
    braces = None
    for match in _PHANTOM.finditer(text):
        if match.start() < position:
            continue
        out.append(text[position : match.start()])
        after = match.end()
        if after < len(text) and text[after] == "{":
            braces = braces or matching_braces(text)
            close = braces.get(after)
            position = close + 1 if close is not None else len(text)
        elif after < len(text) and text[after] == "\\":
            command = re.match(r"\\[a-zA-Z]+|\\.", text[after:])
            position = after + len(command.group())
        else:
            position = min(after + 1, len(text))
    out.append(text[position:])
    return "".join(out)


def answer_boxes(text: str) -> list[Box]:
    """The boxes that can hold an answer: not in Asymptote code, not blank once phantoms are removed."""
    boxes = find_boxes(text)
    if not boxes:
        return []
    spans = _asy_spans(text) if "asy" in text else []
    kept = []
    for box in boxes:
        if any(start <= box.start < end for start, end in spans):
            continue
        if "phantom" in box.content and not remove_phantoms(box.content).strip():
            continue
        kept.append(box)
    return kept


def separates(gap: str) -> bool:
    """Whether the text between two boxes shows work (so the earlier box was a step), not a connective."""
    gap = _LABEL.sub("", gap.rstrip(" $\t\n"))
    gap = _FORMATTING.sub(" ", gap)
    if _WORK.search(gap):
        return True
    return len(_WORD.findall(gap)) >= PROSE_WORDS


def final_group(text: str, boxes: list[Box] | None = None) -> list[str]:
    """The contents of the boxes that state the final answer: the last box and those stated with it."""
    boxes = answer_boxes(text) if boxes is None else boxes
    if not boxes:
        return []
    group = [boxes[-1]]
    for box in reversed(boxes[:-1]):
        if separates(text[box.end : group[0].start]):
            break
        group.insert(0, box)
    return [box.content for box in group]


def _sqrt_parentheses(text: str) -> str:
    """`4\\sqrt(2)` -> `4\\sqrt{2}` (balanced parentheses only)."""
    out, position = [], 0
    for match in _SQRT_PAREN.finditer(text):
        if match.start() < position:
            continue
        depth, index = 0, match.end() - 1
        while index < len(text):
            depth += {"(": 1, ")": -1}.get(text[index], 0)
            if depth == 0:
                break
            index += 1
        if depth:
            continue
        out.append(text[position : match.start()] + "\\sqrt{" + text[match.end() : index] + "}")
        position = index + 1
    return "".join(out) + text[position:]


def _strip_dollars(text: str) -> str:
    """`$9$` -> `9`, `$$9$$` -> `9`; but "Answer $9$" keeps its dollars (they delimit the math in it)."""
    text = text.strip()
    inner = text.strip("$")
    if "$" not in inner and (text.startswith("$") or text.endswith("$")):
        return inner.strip()
    return text


def unwrap_text(text: str) -> str:
    """`\\text{(E)}` -> `(E)`: the content of a text wrapper around the whole (not `\\text{A5}_{11}`)."""
    wrapped = _TEXT_WRAPPER.match(text)
    if wrapped and text.endswith("}") and matching_braces(text).get(wrapped.end() - 1) == len(text) - 1:
        return text[wrapped.end() : -1].strip()
    return text


def tidy(text: str) -> str:
    """The form of a gold or an answer that is parsed: without dollar signs, `\\phantom` spacers, trailing
    punctuation, a unit in words, a `\\text{}` wrapper around everything; `\\sqrt(2)` and `\\frac\\pi 2`
    braced. What is left must parse as a whole, or it is not read at all."""
    text = _LEADING_RELATION.sub("", _strip_dollars(text))
    text = remove_phantoms(text)
    if "\\sqrt" in text:
        text = _sqrt_parentheses(text)
    if "frac" in text:
        text = _UNBRACED_FRAC.sub(lambda m: f"\\{m[1]}{{{m[2]}}}" + (m[3] if m[3] == "{" else f"{{{m[3]}}}"), text)
    for _ in range(2):
        text = _strip_dollars(_TRAILING_PUNCTUATION.sub("", text))
        text = unwrap_text(text)
        unitless = _UNIT.sub("", text)
        if unitless.strip() and unitless != text:
            text = unitless.strip()
    return _TEXT_TOKEN.sub(r"\1", text) if "\\text" in text else text
