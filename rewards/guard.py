"""A reward that misbehaves is named in one line; it never ends a training run with a traceback of TRL's.

A reward function is code of the user's (or a module of ours): it may raise, return strings, return the wrong
number of scores, or NaN. At db84883 each ended the run at step 1 with a traceback through TRL (`ValueError:
too many dimensions 'str'`, naming no reward). `guarded` wraps each reward a recipe trains with:

- its first call is the check: a reward that raises or returns what is not one score per completion on the
  first batch stops the run before any update, with one line naming the reward, the row and what came back
  (RewardFailedError, exit 2 through the recipes' command line);
- after that, a failed row scores None (TRL's "cannot score", never 0.0, which would pass for a score), and
  one line says why the first time (later ones at debug level); once more than `max_failed_share` of the rows
  seen (after at least MIN_ROWS) could not be scored, the run stops with one line: the reward is broken, not
  one row;
- each call's seconds are kept (`last_call_s`), for the monitor's warning when rewards take most of a step.

What this adds to TRL: TRL sums whatever the function returns into a tensor and fails there.
"""

from __future__ import annotations

import functools
import logging
import math
import numbers
import time

logger = logging.getLogger(__name__)

MIN_ROWS = 32  # the share of failed rows is judged over at least this many
MAX_FAILED_SHARE = 0.5


class RewardFailedError(RuntimeError):
    """A reward raised, or returned something that is not one score per completion: on its first batch, or on
    more than the allowed share of rows. The message names the reward, the row and what it returned."""


def _row(index: int, columns: dict) -> str:
    ids = columns.get("id")
    try:
        return f"row {index} (id {ids[index]!r})" if ids is not None else f"row {index}"
    except (IndexError, TypeError, KeyError):
        return f"row {index}"


def _shown(value) -> str:
    text = repr(value)
    return (text if len(text) <= 80 else text[:77] + "...") + f" (a {type(value).__name__})"


def _number(score) -> float | None:
    """A score as a float: any real number, and what converts itself (numpy scalars, a one-element tensor)."""
    if isinstance(score, numbers.Real):
        return float(score)
    if isinstance(score, str | bytes) or not hasattr(score, "__float__"):
        return None
    try:
        return float(score)
    except (TypeError, ValueError):  # a tensor of more than one element
        return None


def check_scores(name: str, scores, count: int, columns: dict) -> tuple[list, str | None]:
    """`scores` as TRL needs them (a float or None per completion), and the first problem found, in words."""
    if isinstance(scores, str | bytes | dict) or not hasattr(scores, "__len__") or not hasattr(scores, "__iter__"):
        return [None] * count, f"reward {name} returned {_shown(scores)}, not a list of {count} scores"
    scores = list(scores)
    if len(scores) != count:
        return [None] * count, f"reward {name} returned {len(scores)} scores for {count} completions"
    checked, problem = [], None
    for index, score in enumerate(scores):
        value = _number(score)
        if score is None:
            checked.append(None)
        elif value is not None and math.isfinite(value):
            checked.append(value)
        else:
            checked.append(None)
            problem = problem or (
                f"reward {name} returned {_shown(score)} for {_row(index, columns)}: a reward returns a finite "
                "number or None for each completion"
            )
    return checked, problem


def guarded(function, max_failed_share: float = MAX_FAILED_SHARE):
    """`function` (a reward in TRL's form), checked as this module says; its attributes (a learned reward's
    `prepare`) are kept."""
    name = getattr(function, "__name__", type(function).__name__)
    seen = {"calls": 0, "rows": 0, "failed": 0, "warned": False}

    @functools.wraps(function)
    def reward(completions, **columns):
        count = len(completions)
        start = time.perf_counter()
        try:
            scores, problem = check_scores(name, function(completions, **columns), count, columns)
        except Exception as error:  # noqa: BLE001 - whatever a reward raises, it is this reward's failure
            scores, problem = [None] * count, f"reward {name} raised {type(error).__name__}: {error}"[:500]
        reward.last_call_s = time.perf_counter() - start
        seen["calls"] += 1
        seen["rows"] += count
        failed = sum(score is None for score in scores) if problem else 0
        seen["failed"] += failed
        if problem and seen["calls"] == 1:
            raise RewardFailedError(f"{problem} (on the first batch, before any update); fix the reward")
        if problem:
            logger.log(
                logging.DEBUG if seen["warned"] else logging.WARNING,
                "%s; %d rows of this batch scored None (later failures are logged at debug level)",
                problem,
                failed,
            )
            seen["warned"] = True
        if seen["rows"] >= MIN_ROWS and seen["failed"] > max_failed_share * seen["rows"]:
            raise RewardFailedError(
                f"reward {name} could not score {seen['failed']} of the {seen['rows']} rows seen, more than "
                f"{max_failed_share:.0%}; the last: {problem}. Fix the reward (or leave it out of the rewards list)"
            )
        return scores

    reward.last_call_s = 0.0
    return reward
