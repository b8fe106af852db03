"""Rejection-sampling fine-tuning: RFT, ReST-EM and STaR in one loop of rounds.

    python recipes/rejection_sampling.py                       # embedded default: the tiny cold-start model
    python recipes/rejection_sampling.py --config recipes/configs/demo/rejection_sampling.yaml --num_rounds 1

Each round (R1 uses one large round of this after reasoning RL; ReST-EM and STaR iterate it):
  1. sample `samples_per_problem` completions per training problem from the current model;
  2. score each with the row's own verifier and keep the correct ones: distinct, at most
     `max_per_problem` per problem, at `random` or `shortest` first (recipes/common/traces.py);
  3. with `star_rationalization`, sample the problems still unsolved again with the gold answer as a hint
     and keep the verified rationales, stored with the original prompt (no hint);
  4. SFT on the kept samples: from the starting model every round (`train_from: base`, ReST-EM), or from
     the previous round's model (`train_from: previous`);
  5. evaluate pass@1 on held-out problems.
Round K writes `round_K/dataset.jsonl` as soon as it is sampled and `round_K/stats.json` (problems
solved, new problems solved, samples kept, pass@1 before and after); a round whose stats say it is
complete is skipped when the run is restarted, and a round with a dataset but no model trains from
that dataset, unless the model, the data or the sampling and training options changed since (the
fingerprint in stats.json, recipes/common/fingerprint.py): then it and the rounds after it are redone. The loop stops early when a round solves no problem that earlier rounds had not. At the end,
`summary.json` and `run_card.json` in output_dir list the rounds and name the final model.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repo's packages importable without an install
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from recipes.common.checks import require_single_process
from recipes.common.config import RecipeParser
from recipes.common.fingerprint import (
    SAMPLING_FIELDS,
    TRAINING_FIELDS,
    changes,
    data_fingerprint,
    fields_of,
    path_identity,
)
from recipes.common.model import load_tokenizer, resolve_model_path
from recipes.common.run_card import write_run_card
from recipes.common.sft_training import ChatTemplateError, check_chat_template, train_sft
from recipes.common.traces import (
    DEFAULT_HINT,
    TraceArguments,
    collect_traces,
    evaluate_pass_at_1,
    load_eval_rows,
    make_trace_sampler,
    solved_ids,
    to_conversations,
)
from tasks.files import read_json, read_jsonl, write_json, write_jsonl
from tasks.schema import DataArguments, load_rows

logger = logging.getLogger("recipes.rejection_sampling")

DEFAULT_CONFIG = "demo/rejection_sampling.yaml"
TRAIN_FROM = ("base", "previous")


@dataclass
class RejectionSamplingArguments(TraceArguments, DataArguments):
    num_rounds: int = field(default=3, metadata={"help": "Rounds of sample -> keep -> SFT -> evaluate at most."})
    train_from: str = field(
        default="base",
        metadata={
            "help": "'base': every round fine-tunes the starting model on its samples (ReST-EM); 'previous': "
            "each round continues from the last round's model."
        },
    )
    star_rationalization: bool = field(
        default=False,
        metadata={"help": "STaR: sample unsolved problems again with the answer as a hint; keep verified rationales."},
    )
    hint_template: str = field(
        default=DEFAULT_HINT,
        metadata={"help": "Appended to the last user message for rationalisation; '{answer}' is the gold answer."},
    )
    cold_start_if_missing: bool = field(
        default=False,
        metadata={"help": "If model_name_or_path does not exist, first run recipes/sft.py's embedded default."},
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.train_from not in TRAIN_FROM:
            raise ValueError(f"train_from must be one of {TRAIN_FROM}, got {self.train_from!r}")
        if self.num_rounds < 1:
            raise ValueError(f"num_rounds must be >= 1, got {self.num_rounds}")
        if "{answer}" not in self.hint_template:
            raise ValueError(f"hint_template must contain '{{answer}}', got {self.hint_template!r}")


def previously_solved(output_dir: Path, before_round: int) -> set[str]:
    """Problems that earlier rounds solved by sampling (rationalised ones do not count)."""
    solved: set[str] = set()
    for k in range(1, before_round):
        path = output_dir / f"round_{k}" / "dataset.jsonl"
        if path.is_file():
            solved |= {row["id"] for row in read_jsonl(path) if not row.get("rationalized")}
    return solved


def sample_round(script_args, sampler, rows: list[dict], seed: int, round_dir: Path) -> tuple[list[dict], dict]:
    """Steps 1-3 of a round: the kept samples (written to dataset.jsonl) and their counts."""
    kept, results = collect_traces(sampler, rows, script_args, seed=seed)
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
            sampler, unsolved, script_args, seed=seed, hint_template=script_args.hint_template
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
    return kept, counts


def main(script_args: RejectionSamplingArguments, training_args, model_args) -> Path:
    """Run the rounds; returns the folder of the last model trained (the starting model if none was)."""
    from transformers import set_seed

    require_single_process("rejection_sampling")
    set_seed(training_args.seed)
    if_missing = "cold_start" if script_args.cold_start_if_missing else None
    base_path = resolve_model_path(model_args.model_name_or_path, if_missing=if_missing)
    # the SFT of each round needs a template that can end turns with EOS and mask the loss: say so before
    # the baseline evaluation and all the sampling, not after them
    check_chat_template(load_tokenizer(base_path, model_args.model_revision), training_args)
    rows = list(load_rows(script_args))
    eval_rows = load_eval_rows(script_args)
    output_dir = Path(training_args.output_dir)
    logger.info("%d training problems from %s, %d held out", len(rows), script_args.dataset_name, len(eval_rows))

    # What every round's files depend on (num_rounds and the held-out evaluation excluded): a round made with
    # other inputs is redone, and so is every round after it (they start from its model and its solved set).
    fingerprint = {
        "base_model": path_identity(base_path),
        "data": data_fingerprint(script_args),
        "sampling": fields_of(script_args, SAMPLING_FIELDS + ("star_rationalization", "hint_template", "train_from")),
        "training": fields_of(training_args, TRAINING_FIELDS),
    }
    current, history = base_path, []
    for k in range(1, script_args.num_rounds + 1):
        round_dir = output_dir / f"round_{k}"
        stats = read_json(round_dir / "stats.json") or {}
        stale = changes(stats.get("fingerprint"), fingerprint) if stats else []
        if stale:
            logger.warning("round %d: the files in %s are stale, redoing the round: %s", k, round_dir, "; ".join(stale))
            stats = {}
        if stats.get("complete"):
            logger.info("round %d: complete in %s, skipped", k, round_dir)
            history.append(stats)
            if stats.get("stopped"):
                break
            current = stats["model"]
            continue

        round_seed = training_args.seed + 1000 * k  # fresh samples every round, the same ones on a rerun
        if (round_dir / "dataset.jsonl").is_file() and stats.get("sampled"):  # sampled, then interrupted
            logger.info("round %d: reusing the samples in %s", k, round_dir / "dataset.jsonl")
            kept, before = read_jsonl(round_dir / "dataset.jsonl"), stats.get("pass@1_before")
        else:
            sampler = make_trace_sampler(script_args, current)
            if history:
                before = history[-1]["pass@1_after"]
            else:
                before = evaluate_pass_at_1(sampler, eval_rows, script_args, training_args.seed)
            logger.info(
                "round %d: sampling %d x %d completions from %s", k, len(rows), script_args.samples_per_problem, current
            )
            kept, counts = sample_round(script_args, sampler, rows, round_seed, round_dir)
            sampler.close()
            stats = {"round": k, "start_model": str(current), "sampled": True, **counts, "fingerprint": fingerprint}

        new = {row["id"] for row in kept if not row.get("rationalized")} - previously_solved(output_dir, k)
        stats.update({"new_problems_solved": len(new), "pass@1_before": before})
        logger.info(
            "round %d: %d problems solved (%d new), %d samples kept",
            k, stats["problems_solved"], len(new), stats["samples_kept"] + stats.get("rationalized_kept", 0),
        )  # fmt: skip
        if not new:
            stats.update(complete=True, stopped="no new problem solved", model=str(current))
            write_json(round_dir / "stats.json", stats)
            history.append(stats)
            logger.warning("round %d solved no new problem: stopping (model stays %s)", k, current)
            break
        write_json(round_dir / "stats.json", stats)

        start = base_path if script_args.train_from == "base" else current
        current = train_sft(
            start,
            to_conversations(kept, str(round_dir / "dataset.jsonl")),
            training_args,
            model_args,
            output_dir=round_dir / "model",
            merge_lora=True,  # the next round samples from a plain model
            card_configs={"script": script_args, "training": training_args, "model": model_args},
            card_extra={"recipe": "rejection_sampling", "round": k, "samples_kept": len(kept)},
        )
        sampler = make_trace_sampler(script_args, current)
        after = evaluate_pass_at_1(sampler, eval_rows, script_args, training_args.seed)
        sampler.close()
        stats.update(complete=True, model=str(current), **{"pass@1_after": after})
        write_json(round_dir / "stats.json", stats)
        history.append(stats)
        if before and after:
            logger.info("round %d: held-out pass@1 %.3f -> %.3f", k, before["pass@1"], after["pass@1"])

    summary = {"rounds": history, "final_model": str(current)}
    write_json(output_dir / "summary.json", summary)
    write_run_card(
        output_dir,
        {"script": script_args, "training": training_args, "model": model_args},
        datasets={"train": rows, "eval": eval_rows},
        extra={"recipe": "rejection_sampling", "base_model": base_path, **summary},
    )
    logger.info("final model: %s", current)
    return Path(current)


def make_parser() -> RecipeParser:
    """This recipe's command line: its dataclasses, its default config and the errors that are the user's."""
    from trl import ModelConfig, SFTConfig

    return RecipeParser(
        (RejectionSamplingArguments, SFTConfig, ModelConfig), DEFAULT_CONFIG, user_errors=(ChatTemplateError,)
    )


def cli(argv: list[str] | None = None) -> Path:
    """`python recipes/rejection_sampling.py ...` as a function: parse `argv` (default sys.argv), then train."""
    return make_parser().run(main, argv)


if __name__ == "__main__":
    cli()
