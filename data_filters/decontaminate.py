"""Decontamination: drop (or tag) training problems that share word n-grams with evaluation problems.

Qwen3 removed training problems too similar to its evaluation sets; open-r1 ships an 8-gram check. Here a
text is lower-cased and split on whitespace, so re-cased or re-spaced copies, and copies behind a prefix,
share every n-gram with their original. An evaluation problem shorter than `n` words is matched as a
whole: all its words must appear in a row, in order (a 4-word MATH-500 problem has no 8-gram at all).

Speed: a 100k x 10k comparison must not be 10^9 pairs. The evaluation n-grams are indexed once, as
64-bit hashes of word ids; the training corpus is hashed in a few vectorised numpy passes; only hash hits
are looked at in Python, and each is confirmed by comparing the words themselves, so a hash collision
never flags a row. Words that occur in no evaluation text cannot be part of a shared n-gram and are not
even hashed.

A shared 8-gram alone also catches boilerplate ("where $m$ and $n$ are relatively prime positive
integers. Find $m+n$" is in a quarter of all AIME problems). Each match therefore carries its
`coverage`: the share of the evaluation problem's n-grams found in the training row (1.0 for a copy).
`min_coverage` (default 0: any shared n-gram) raises the bar from "shares a phrase" to "is the problem".
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from basics.atomic_files import write_atomic
from data_filters.report import StepReport, check_mode, without_rows
from tasks.rows import question_text, set_column
from tasks.text import normalize_words

logger = logging.getLogger(__name__)

_HASH_BASE = np.uint64(0x9E3779B97F4A7C15)  # odd 64-bit multiplier; arithmetic wraps modulo 2**64
_MISSING = -1  # a training word that occurs in no evaluation text


@dataclass(frozen=True)
class Overlap:
    """One (training row, evaluation row) pair that shares at least one n-gram."""

    train_index: int
    eval_index: int
    ngram: str  # the first shared n-gram in the training text (or the whole short evaluation text)
    shared: int  # distinct n-grams shared
    coverage: float  # shared / distinct n-grams of the evaluation text


class _Corpus:
    """Texts as one flat array of word ids, with the text each position belongs to."""

    def __init__(self, texts: Sequence[str], vocabulary: dict[str, int], grow: bool):
        words: list[str] = []
        self.lengths = np.zeros(len(texts), dtype=np.int64)
        for index, text in enumerate(texts):
            text_words = normalize_words(text)
            self.lengths[index] = len(text_words)
            words += text_words
        if grow:
            ids = [vocabulary.setdefault(word, len(vocabulary)) for word in words]
        else:
            lookup = vocabulary.get
            ids = [lookup(word, _MISSING) for word in words]
        self.ids = np.asarray(ids, dtype=np.int64)
        self.owner = np.repeat(np.arange(len(texts), dtype=np.int64), self.lengths)

    def window_hashes(self, size: int) -> tuple[np.ndarray, np.ndarray]:
        """(start positions, hashes) of every window of `size` words inside one text and free of missing words."""
        count = len(self.ids) - size + 1
        if count <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint64)
        valid = self.owner[:count] == self.owner[size - 1 :]
        missing = np.concatenate([[0], np.cumsum(self.ids == _MISSING)])
        valid &= (missing[size:] - missing[:count]) == 0
        words = (self.ids + 1).astype(np.uint64)  # + 1: a word id of 0 must still move the hash
        hashes = np.zeros(count, dtype=np.uint64)
        for offset in range(size):
            hashes = hashes * _HASH_BASE + words[offset : offset + count]
        return np.flatnonzero(valid), hashes[valid]


def _distinct_eval_ngrams(evals: _Corpus, size: int, n: int):
    """(starts, hashes, owners) of the distinct n-grams of each evaluation text that is matched with windows of
    `size` words (texts of at least n words for size n, texts of exactly `size` words below n), sorted by hash."""
    starts, hashes = evals.window_hashes(size)
    owners = evals.owner[starts]
    keep = evals.lengths[owners] >= n if size == n else evals.lengths[owners] == size
    starts, hashes, owners = starts[keep], hashes[keep], owners[keep]
    order = np.lexsort((starts, owners, hashes))
    starts, hashes, owners = starts[order], hashes[order], owners[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = (hashes[1:] != hashes[:-1]) | (owners[1:] != owners[:-1])
    return starts[first], hashes[first], owners[first]


_CHUNK_ENTRIES = 4_000_000  # (training window, evaluation n-gram) candidates confirmed at once: bounds memory


def _confirmed_pairs(train: _Corpus, evals: _Corpus, eval_index, size: int, starts, hashes, num_evals: int):
    """(pair keys, first training position, distinct shared n-grams) for hash hits of whole training rows.

    `eval_index` = (starts, hashes, owners) of the evaluation n-grams, sorted by hash. Each hit is expanded to
    every evaluation n-gram with its hash and confirmed word by word: a hash collision flags nothing.
    """
    eval_starts, eval_hashes, eval_owners = eval_index
    low = np.searchsorted(eval_hashes, hashes, side="left")
    counts = np.searchsorted(eval_hashes, hashes, side="right") - low
    total = int(counts.sum())
    offsets = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    entries = np.repeat(low, counts) + offsets
    positions = np.repeat(starts, counts)
    hashes = np.repeat(hashes, counts)
    same = np.ones(total, dtype=bool)
    for offset in range(size):
        same &= train.ids[positions + offset] == evals.ids[eval_starts[entries] + offset]
    positions, hashes, owners = positions[same], hashes[same], eval_owners[entries[same]]
    pairs = train.owner[positions] * num_evals + owners
    order = np.lexsort((positions, hashes, pairs))
    pairs, hashes, positions = pairs[order], hashes[order], positions[order]
    new_hash = np.ones(len(pairs), dtype=bool)
    new_hash[1:] = (pairs[1:] != pairs[:-1]) | (hashes[1:] != hashes[:-1])
    unique_pairs, pair_starts, shared = np.unique(pairs[new_hash], return_index=True, return_counts=True)
    first_positions = np.minimum.reduceat(positions[new_hash], pair_starts) if len(pair_starts) else pair_starts
    return unique_pairs, first_positions, shared


def _row_chunks(train: _Corpus, starts, work) -> list[tuple[int, int]]:
    """[begin, end) slices of the hits, cut at training-row boundaries, each with at most about
    _CHUNK_ENTRIES of `work` (candidates to confirm). A row never spans two chunks, so each chunk's pairs
    are complete and no merging is needed."""
    if not len(starts):
        return []
    owners = train.owner[starts]
    row_begins = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]])
    cumulative = np.r_[0, np.cumsum(work)]
    chunks, begin = [], 0
    for row_begin in row_begins[1:].tolist() + [len(starts)]:
        if cumulative[row_begin] - cumulative[begin] > _CHUNK_ENTRIES and row_begin > begin:
            chunks.append((begin, row_begin))
            begin = row_begin
    chunks.append((begin, len(starts)))
    return chunks


def find_overlap_matches(train_texts: Sequence[str], eval_texts: Sequence[str], n: int = 8) -> list[Overlap]:
    """Every (train, eval) pair sharing a word n-gram, with the shared n-gram and the coverage, sorted by index."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    vocabulary: dict[str, int] = {}
    evals = _Corpus(eval_texts, vocabulary, grow=True)
    train = _Corpus(train_texts, vocabulary, grow=False)
    words = list(vocabulary)
    num_evals = max(1, len(eval_texts))
    distinct = np.zeros(len(eval_texts), dtype=np.int64)
    found: list[tuple[int, int, int, int]] = []  # (pair key, first position, shared, size)
    # Window sizes: n for ordinary evaluation texts, the whole length for shorter ones. Each evaluation text
    # takes part in exactly one size, so the pairs found at different sizes never need merging.
    for size in sorted({n} | {int(length) for length in evals.lengths if 0 < length < n}):
        eval_index = _distinct_eval_ngrams(evals, size, n)
        distinct += np.bincount(eval_index[2], minlength=len(eval_texts))
        if not len(eval_index[1]):
            continue
        starts, hashes = train.window_hashes(size)
        hit = np.isin(hashes, eval_index[1])
        starts, hashes = starts[hit], hashes[hit]
        work = np.searchsorted(eval_index[1], hashes, "right") - np.searchsorted(eval_index[1], hashes, "left")
        for begin, end in _row_chunks(train, starts, work):
            pairs, positions, shared = _confirmed_pairs(
                train, evals, eval_index, size, starts[begin:end], hashes[begin:end], num_evals
            )
            found += [(*entry, size) for entry in zip(pairs.tolist(), positions.tolist(), shared.tolist(), strict=True)]
    matches = []
    for pair, start, shared, size in sorted(found):
        train_index, eval_index = divmod(pair, num_evals)
        ngram = " ".join(words[word] for word in train.ids[start : start + size].tolist())
        coverage = min(1.0, shared / max(1, int(distinct[eval_index])))
        matches.append(Overlap(train_index, eval_index, ngram, shared, coverage))
    return matches


def find_overlaps(train_texts: Sequence[str], eval_texts: Sequence[str], n: int = 8) -> list[tuple[int, int]]:
    """(train index, eval index) pairs that share a word n-gram after lower-casing and whitespace normalisation."""
    return [(match.train_index, match.eval_index) for match in find_overlap_matches(train_texts, eval_texts, n)]


def _eval_texts(name_or_path: str) -> tuple[list[str], list[str]]:
    """(questions, ids) of an evaluation set by registry name or path, without any prompt template."""
    from tasks.datasets import load_eval_dataset

    rows = load_eval_dataset(name_or_path)
    texts = [
        question_text(row) for row in rows.select_columns([c for c in ("prompt", "problem") if c in rows.column_names])
    ]
    return texts, list(rows["id"])


def decontaminate(
    dataset,
    eval_sets: Sequence[str],
    n: int = 8,
    min_coverage: float = 0.0,
    mode: str = "drop",
    question_field: str = "problem",
    report_path: str | Path | None = None,
    progress: bool = True,
):
    """Drop (or tag, with columns `contaminated` and `contaminated_by`) rows that share an n-gram with any of
    `eval_sets` (registry names such as `aime24`/`math500`, or paths). Returns `(dataset, StepReport)`.

    `report_path` gets one JSON line per match: the training row, the evaluation set and row, the shared
    n-gram and the coverage, so every drop can be checked by eye.
    """
    from tqdm.auto import tqdm

    check_mode(mode, "decontaminate")
    if not eval_sets:
        raise ValueError("decontaminate: give at least one evaluation set in eval_sets (e.g. [aime24, math500])")
    if not 0.0 <= min_coverage <= 1.0:
        raise ValueError(f"decontaminate: min_coverage must be in [0, 1], got {min_coverage}")
    started = time.perf_counter()
    columns = [c for c in ("prompt", "messages", question_field) if c in dataset.column_names]
    train_texts = [question_text(row, question_field) for row in dataset.select_columns(columns)]
    train_ids = dataset["id"] if "id" in dataset.column_names else [str(i) for i in range(len(dataset))]
    flagged_by: dict[int, list[str]] = {}
    reasons: dict[str, int] = {}
    details: dict = {"n": n, "min_coverage": min_coverage}
    records = []
    for name in tqdm(list(eval_sets), desc="decontaminate", unit="eval set", disable=not progress):
        texts, ids = _eval_texts(name)
        matches = find_overlap_matches(train_texts, texts, n)
        kept = [match for match in matches if match.coverage >= min_coverage]
        rows = sorted({match.train_index for match in kept})
        for index in rows:
            flagged_by.setdefault(index, []).append(name)
        if rows:
            reasons[f"overlaps {name}"] = len(rows)
        details[name] = {
            "eval_rows": len(texts),
            "pairs_any_shared_ngram": len(matches),
            "rows_any_shared_ngram": len({match.train_index for match in matches}),
            "pairs_flagged": len(kept),
            "rows_flagged": len(rows),
            "eval_rows_hit": len({match.eval_index for match in kept}),
        }
        records += [
            {
                "train_index": match.train_index,
                "train_id": train_ids[match.train_index],
                "eval_set": name,
                "eval_index": match.eval_index,
                "eval_id": ids[match.eval_index],
                "ngram": match.ngram,
                "shared_ngrams": match.shared,
                "coverage": round(match.coverage, 4),
            }
            for match in kept
        ]
        logger.info(
            "decontaminate: %d rows overlap %s (%d-grams, coverage >= %g): %s",
            len(rows),
            name,
            n,
            min_coverage,
            details[name],
        )
    files = []
    if report_path is not None:
        path = Path(report_path)
        write_atomic(path, "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records))
        files.append(str(path))
    if mode == "drop":
        result = without_rows(dataset, flagged_by)
    else:
        flags = [index in flagged_by for index in range(len(dataset))]
        sources = [",".join(flagged_by.get(index, [])) for index in range(len(dataset))]
        result = set_column(set_column(dataset, "contaminated", flags, "bool"), "contaminated_by", sources, "string")
    report = StepReport.timed(
        "decontaminate", dataset, result, mode, len(flagged_by), reasons, started, details=details, files=files
    )
    return result, report
