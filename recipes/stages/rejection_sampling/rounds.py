"""A round of rejection sampling and its files: what recipes/rejection_sampling.py does between "start a round"
and "fine-tune on what it kept".

Round K lives in `output_dir/round_K/`: `dataset.jsonl` (the kept samples, written as soon as they are
drawn) and `stats.json` (counts, pass@1 before and after, the model, and the fingerprint of the inputs
that made them). A rerun reads `stats.json` back (`read_round`): a complete round is skipped, a sampled
one trains from its dataset, and one made from other inputs (recipes.common.fingerprint) is redone.
"""

from __future__ import annotations

import logging
from pathlib import Path

from basics.atomic_files import read_json, read_jsonl, write_jsonl
from recipes.common.fingerprint import TRAINING_FIELDS, fields_of, path_identity, sampling_fingerprint, stale
from recipes.common.held_out_eval import evaluate_pass_at_1
from recipes.common.traces import collect_traces, make_trace_sampler, solved_ids

# a round's SFT tokenizer, with tools the tool template: recipes.common.traces', which distillation's student shares
from recipes.common.traces import sft_tokenizer as sft_tokenizer
from recipes.stages.rejection_sampling.state import Phase, RoundState

logger = logging.getLogger(__name__)


def round_fingerprint(script_args, training_args, base_path: str) -> dict:
    """What every round's files depend on (num_rounds and the held-out evaluation excluded): a round made with
    other inputs is redone, and so is every round after it (they start from its model and its solved set)."""
    return {
        "base_model": path_identity(base_path),
        **sampling_fingerprint(script_args, ("star_rationalization", "hint_template", "train_from")),
        "training": fields_of(training_args, TRAINING_FIELDS),
    }


def read_round(round_dir: Path, k: int, fingerprint: dict) -> RoundState:
    """What a previous run left of round `k`: a new round when it left nothing usable (no stats, stats made from
    other inputs, or a sampled round whose dataset.jsonl is gone)."""
    stats = read_json(round_dir / "stats.json") or {}
    changed = stale(stats, fingerprint)
    if changed:
        logger.warning("round %d: the files in %s are stale, redoing the round: %s", k, round_dir, "; ".join(changed))
    if not stats or changed:
        return RoundState(round=k)
    state = RoundState.from_json({"round": k, **stats})
    if state.phase is Phase.SAMPLED and not (round_dir / "dataset.jsonl").is_file():
        return RoundState(round=k)
    return state


def previously_solved(output_dir: Path, before_round: int) -> set[str]:
    """Problems that earlier rounds solved by sampling (rationalised ones do not count)."""
    solved: set[str] = set()
    for k in range(1, before_round):
        path = output_dir / f"round_{k}" / "dataset.jsonl"
        if path.is_file():
            solved |= {row["id"] for row in read_jsonl(path) if not row.get("rationalized")}
    return solved


def sample_round(
    script_args,
    model_path: str,
    rows: list[dict],
    eval_rows: list[dict],
    *,
    round_dir: Path,
    k: int,
    seed: int,
    fingerprint: dict,
    previous: RoundState | None,
) -> tuple[list[dict], RoundState]:
    """Steps 1-3 of round `k` from `model_path`: the kept samples (written to dataset.jsonl as soon as they are
    drawn) and the round's state, sampled, with the held-out pass@1 of `model_path`.

    That pass@1 is the `previous` round's result when there is one; else it is measured here with the sampler
    that draws the round's samples (one model load). `seed` is the run's seed: the round samples with a seed of its
    own made from it, fresh every round and the same on a rerun.
    """
    sampler = make_trace_sampler(script_args, model_path)
    if previous:
        before = previous.pass_at_1_after
    else:
        before = evaluate_pass_at_1(sampler, eval_rows, script_args, seed)
    logger.info("round %d: sampling %d x %d completions from %s", k, len(rows), script_args.sampling.n, model_path)
    round_seed = seed + 1000 * k
    kept, results = collect_traces(sampler, rows, script_args, seed=round_seed)
    solved = solved_ids(results)
    counts = {
        "problems": len(rows),
        "problems_solved": len(solved),
        "samples_drawn": sum(result.n for result in results),
        "samples_correct": sum(result.num_correct for result in results),
        "samples_kept": len(kept),
        "train_pass@1": sum(result.pass_at(1) for result in results) / max(len(results), 1),
    }
    if script_args.star_rationalization:
        unsolved = [row for row in rows if row["id"] not in solved]
        rationales, _ = collect_traces(
            sampler, unsolved, script_args, seed=round_seed, hint_template=script_args.hint_template
        )
        counts["rationalized_problems"] = len({row["id"] for row in rationales})
        counts["rationalized_kept"] = len(rationales)
        kept += rationales
        logger.info(
            "STaR: %d of %d unsolved problems rationalised with the answer as a hint",
            counts["rationalized_problems"],
            len(unsolved),
        )
    write_jsonl(round_dir / "dataset.jsonl", kept)
    sampler.close()
    state = RoundState(k, Phase.SAMPLED, str(model_path), counts, fingerprint, pass_at_1_before=before)
    return kept, state


def left_as_it_was(output_dir: Path, rounds: int) -> bool:
    """True, saying so in one line, where a rerun found every round complete and unchanged and the run's summary
    written (issue 57: a finished run is left alone: nothing sampled, trained or written again)."""
    if not (output_dir / "summary.json").is_file():
        return False
    logger.info(
        "%s has finished: its %d round(s) are complete and unchanged; nothing sampled, trained or written. For more "
        "rounds, raise --num_rounds; to start afresh, give a new --output_dir", output_dir, rounds,
    )  # fmt: skip
    return True
