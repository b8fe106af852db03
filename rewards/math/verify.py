"""Verification: each completion's verdict against its gold, the comparisons that need math-verify run in
parallel in the worker pool (rewards.math.pool) through a cache keyed on (gold, answer).

A gold is scored only when math-verify reads it as a whole: a gold's first real comparison tells, once per gold,
and a gold known to parse lets the local decisions (rewards.math.compare) stand without math-verify.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from basics.option_values import is_yes
from rewards.math.checks import Plan, Verdict, precheck
from rewards.math.compare import Gold, local_decision, read_gold

logger = logging.getLogger("rewards.math")

DEFAULT_TIMEOUT_S = 2.0
STARTUP_WAIT_S = 60.0


_CACHE: dict[tuple[str, str], dict] = {}
_CACHE_LIMIT = 200_000
_CACHE_LOCK = threading.Lock()
_GOLD_PARSES: dict[str, bool] = {}  # tidied gold -> whether math-verify reads it as a whole
_WARNED_GOLDS: set[str] = set()


def _pair_result(result: dict, timeout_s: float) -> tuple[bool | None, str]:
    if result.get("timeout"):
        return False, f"verification overran {timeout_s:g} s"
    if result.get("gold_ok") is False:
        return None, "gold answer cannot be parsed as a whole"
    if result.get("error"):
        return False, f"verifier error: {result['error']}"
    if not result.get("answer_ok", True):
        return False, "answer cannot be parsed"
    return bool(result.get("equal")), "math-verify"


def _combine(plan: Plan, outcomes: list[list[tuple[bool | None, str]]]) -> Verdict:
    """All answers stated together must equal the gold; a gold that cannot be read scores nothing."""
    flat = [outcome for answer in outcomes for outcome in answer]
    unscorable = [reason for correct, reason in flat if correct is None]
    if unscorable:
        return Verdict(None, plan.shown, unscorable[0])
    last = outcomes[-1]
    failed = [reason for correct, reason in last if not correct]
    if failed:
        return Verdict(False, plan.shown, failed[0])
    if any(not correct for answer in outcomes[:-1] for correct, _ in answer):
        return Verdict(False, plan.shown, "two or more distinct boxed answers stated together")
    if plan.not_a_number:  # the right value, written as an expression (`\\boxed{7+5}`): a wrong one keeps its reason
        return Verdict(False, plan.shown, plan.not_a_number)
    reasons = sorted({reason for _, reason in flat})
    return Verdict(True, plan.shown, " + ".join(reasons))


def verify_batch(
    golds: list,
    completions: list[str],
    ids: list | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    fallbacks: bool = False,
    pool=None,
    require_number: bool | Sequence[bool | None] | None = False,
    warn_unscorable: bool = True,
) -> list[Verdict]:
    """Verdicts for many completions; the comparisons math-verify must decide run in parallel in the pool.

    `require_number`: one choice for the batch, or one per completion (a row's `require_number` column, None
    read as False): where the gold is a number, the answer must be a number literal, not an expression.
    `warn_unscorable=False`: no warning for a gold that cannot be read, for callers whose "golds" are not a
    dataset's (maj@k voting compares samples' answers with each other).
    """
    if len(golds) != len(completions):
        raise ValueError(f"{len(golds)} gold answers for {len(completions)} completions")
    ids = ids if ids is not None else [None] * len(golds)
    literal = per_completion(require_number, len(golds))
    verdicts: list[Verdict | None] = [None] * len(golds)
    plans: dict[int, tuple[Plan, Gold]] = {}
    for index, (raw, completion) in enumerate(zip(golds, completions, strict=True)):
        gold = read_gold(raw)
        decided = precheck(gold, completion if isinstance(completion, str) else "", fallbacks, literal[index])
        if isinstance(decided, Verdict):
            verdicts[index] = decided
        else:
            plans[index] = (decided, gold)
    outcomes: dict[int, list[list]] = {}
    open_items = []  # comparisons not decided yet: (index, answer number, pair number, pair, local decision)
    for index, (plan, gold) in plans.items():
        outcomes[index] = [[None] * len(check) for check in plan.checks]
        for a, check in enumerate(plan.checks):
            for c, pair in enumerate(check):
                decided, reason, needs_gold = local_decision(gold, *pair)
                if decided is not None and not needs_gold:
                    outcomes[index][a][c] = (decided, reason)
                else:
                    open_items.append((index, a, c, pair, (decided, reason)))
    # Golds not yet known to parse: one real comparison each first (an answer written as the gold if there is
    # one, which the worker decides from the gold's parse alone); it tells whether the gold reads as a whole.
    probes: dict[str, tuple[str, str]] = {}
    for _, _, _, pair, _ in open_items:
        if pair[0] not in _GOLD_PARSES and (pair[0] not in probes or pair[1] == pair[0]):
            probes[pair[0]] = pair
    _learn(list(probes.values()), timeout_s, pool)
    pending: dict[tuple[str, str], list[tuple[int, int, int]]] = {}
    for index, a, c, pair, local in open_items:
        parses = _GOLD_PARSES.get(pair[0])
        if parses is False:
            outcomes[index][a][c] = (None, "gold answer cannot be parsed as a whole")
        elif parses and local[0] is not None:
            outcomes[index][a][c] = local
        else:
            pending.setdefault(pair, []).append((index, a, c))
    pairs = list(pending)
    for pair, result in zip(pairs, _learn(pairs, timeout_s, pool), strict=True):
        for index, a, c in pending[pair]:
            outcomes[index][a][c] = _pair_result(result, timeout_s)
    for index, (plan, _) in plans.items():
        verdicts[index] = _combine(plan, outcomes[index])
    for index, verdict in enumerate(verdicts):
        if verdict.correct is None and warn_unscorable:
            key = f"row {ids[index]}" if ids[index] is not None else f"gold {golds[index]!r}"
            if key not in _WARNED_GOLDS:
                _WARNED_GOLDS.add(key)
                logger.warning("%s: %s (gold %r); it is not scored", key, verdict.reason, golds[index])
    return verdicts


def per_completion(require_number: bool | Sequence[bool | None] | None, size: int) -> list[bool]:
    """`require_number` as one bool per completion: a single choice repeated, or a column checked for length."""
    if require_number is None or isinstance(require_number, (bool, int, str)):
        return [is_yes(require_number)] * size
    choices = [is_yes(choice) for choice in require_number]
    if len(choices) != size:
        raise ValueError(f"require_number has {len(choices)} values for {size} completions")
    return choices


def _learn(pairs: list[tuple[str, str]], timeout_s: float, pool) -> list[dict]:
    """_compare, remembering for each gold whether math-verify read it as a whole."""
    results = _compare(pairs, timeout_s, pool)
    if len(_GOLD_PARSES) > _CACHE_LIMIT:
        _GOLD_PARSES.clear()
    for pair, result in zip(pairs, results, strict=True):
        if not result.get("timeout") and (result.get("gold_ok") is False or not result.get("error")):
            _GOLD_PARSES[pair[0]] = result.get("gold_ok") is not False
    return results


def _compare(pairs: list[tuple[str, str]], timeout_s: float, pool) -> list[dict]:
    """math-verify's results for these pairs, from the cache or the worker pool."""
    results: list[dict | None] = [None] * len(pairs)
    if not pairs:
        return []
    with _CACHE_LOCK:
        for position, pair in enumerate(pairs):
            results[position] = _CACHE.get(pair)
    missing = [position for position, result in enumerate(results) if result is None]
    if missing:
        from rewards.math.pool import shared_pool

        fresh = (pool or shared_pool()).compare([pairs[position] for position in missing], timeout_s)
        with _CACHE_LOCK:
            if len(_CACHE) > _CACHE_LIMIT:
                _CACHE.clear()
            for position, result in zip(missing, fresh, strict=True):
                results[position] = result
                if "verifier process died" not in str(result.get("error")):
                    _CACHE[pairs[position]] = result
    return results


def start_workers(pool=None) -> None:
    """Boot the math-verify worker processes now (a one-time cost of a second or two), e.g. before timing;
    otherwise the first comparison that needs them starts them."""
    from rewards.math.pool import shared_pool

    (pool or shared_pool()).compare([("1", "1")], STARTUP_WAIT_S)


def verify(
    gold: str,
    completion: str,
    row_id=None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    fallbacks: bool = False,
    require_number: bool = False,
) -> Verdict:
    """Score one completion against a gold answer (`require_number`: see verify_batch)."""
    options = {"timeout_s": timeout_s, "fallbacks": fallbacks, "require_number": require_number}
    return verify_batch([gold], [completion], [row_id], **options)[0]
