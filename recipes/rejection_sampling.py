"""Rejection-sampling fine-tuning: RFT, ReST-EM and STaR in one loop of rounds.

    python recipes/rejection_sampling.py                       # embedded default: the tiny cold-start model
    python recipes/rejection_sampling.py --config recipes/configs/demo/rejection_sampling.yaml --num_rounds 1

Each round (R1 uses one large round of this after reasoning RL; ReST-EM and STaR iterate it):
  1. sample `sampling: {n}` completions per training problem from the current model;
  2. score each with the row's own verifier and keep the correct ones: distinct, at most
     `max_per_problem` per problem, at `random` or `shortest` first (recipes/common/traces/);
  3. with `star_rationalization`, sample the problems still unsolved again with the gold answer as a hint
     and keep the verified rationales, stored with the original prompt (no hint);
  4. SFT on the kept samples: from the starting model every round (`train_from: base`, ReST-EM), or from
     the previous round's model (`train_from: previous`);
  5. evaluate pass@1 on held-out problems.
Round K writes `round_K/dataset.jsonl` as soon as it is sampled and `round_K/stats.json` (problems solved, new
problems solved, samples kept, pass@1 before and after; recipes/stages/rejection_sampling/rounds.py); a rerun skips a complete
round and trains a sampled one from its dataset, unless the model, the data or the options changed since
(recipes/common/fingerprint.py): then it and the rounds after it are redone. The loop stops early when a round solves
no problem that earlier rounds had not. At the end, `summary.json` and `run_card.json` in output_dir list the rounds
and name the final model. A finished run's rerun writes nothing.
"""

from __future__ import annotations

import logging
from pathlib import Path

if __package__ in (None, ""):  # run by path: this checkout on sys.path, with or without the venv
    import _checkout  # noqa: F401  (recipes/_checkout.py, beside this file)

from basics.atomic_files import read_jsonl, write_json
from recipes.common.command_line.checks import require_single_process
from recipes.common.command_line.config import RecipeParser
from recipes.common.data import kept_rows_as_conversations
from recipes.common.held_out_eval import evaluate_model, load_eval_rows
from recipes.common.model.loading import resolve_model_path
from recipes.common.run_card import write_run_card
from recipes.common.training.sft_step import ChatTemplateError, check_chat_template, train_sft
from recipes.stages.rejection_sampling import rounds
from recipes.stages.rejection_sampling.arguments import RejectionSamplingArguments
from recipes.stages.rejection_sampling.state import Phase
from tasks.schema import load_rows

logger = logging.getLogger("recipes.rejection_sampling")

DEFAULT_CONFIG = "demo/rejection_sampling.yaml"


def main(script_args: RejectionSamplingArguments, training_args, model_args) -> Path:
    """Run the rounds; returns the folder of the last model trained (the starting model if none was)."""
    from transformers import set_seed

    require_single_process("rejection_sampling")
    set_seed(training_args.seed)
    if_missing = script_args.missing_model_fallback()
    base_path = resolve_model_path(model_args.model_name_or_path, if_missing=if_missing)
    # each round's SFT needs a template that ends turns with EOS and masks the loss: said before any sampling
    check_chat_template(rounds.sft_tokenizer(script_args, base_path, training_args, model_args), training_args)
    rows = list(load_rows(script_args))
    eval_rows = load_eval_rows(script_args)
    output_dir = Path(training_args.output_dir)
    logger.info("%d training problems from %s, %d held out", len(rows), script_args.dataset_name, len(eval_rows))

    fingerprint = rounds.round_fingerprint(script_args, training_args, base_path)
    current, history, worked = base_path, [], False
    for k in range(1, script_args.num_rounds + 1):
        round_dir = output_dir / f"round_{k}"
        state = rounds.read_round(round_dir, k, fingerprint)
        if state.finished:
            logger.info("round %d: complete in %s, skipped", k, round_dir)
            history.append(state)
            if state.phase is Phase.STOPPED:
                break
            current = state.model
            continue
        worked = True

        if state.phase is Phase.SAMPLED:  # sampled, then interrupted
            logger.info("round %d: reusing the samples in %s", k, round_dir / "dataset.jsonl")
            kept = read_jsonl(round_dir / "dataset.jsonl")
        else:
            kept, state = rounds.sample_round(
                script_args, current, rows, eval_rows, round_dir=round_dir, k=k, seed=training_args.seed,
                fingerprint=fingerprint, previous=history[-1] if history else None,
            )  # fmt: skip
        new = {row["id"] for row in kept if not row.get("rationalized")} - rounds.previously_solved(output_dir, k)
        state.new_problems_solved = len(new)
        logger.info(
            "round %d: %d problems solved (%d new), %d samples kept",
            k, state.counts["problems_solved"], len(new), state.samples_kept,
        )  # fmt: skip
        if not new:
            state.phase, state.stopped_because, state.model = Phase.STOPPED, "no new problem solved", str(current)
            write_json(round_dir / "stats.json", state.to_json())
            history.append(state)
            logger.warning("round %d solved no new problem: stopping (model stays %s)", k, current)
            break
        write_json(round_dir / "stats.json", state.to_json())

        start = base_path if script_args.train_from == "base" else current
        current = train_sft(
            start, kept_rows_as_conversations(kept, str(round_dir / "dataset.jsonl")), training_args, model_args,
            output_dir=round_dir / "model",
            tokenizer=rounds.sft_tokenizer(script_args, start, training_args, model_args),  # with tools: theirs
            merge_lora=True,  # the next round samples from a plain model
            card_configs={"script": script_args, "training": training_args, "model": model_args},
            card_extra={"recipe": "rejection_sampling", "round": k, "samples_kept": len(kept)},
        )  # fmt: skip
        state.pass_at_1_after = evaluate_model(script_args, current, eval_rows, training_args.seed)
        state.phase, state.model = Phase.TRAINED, str(current)
        write_json(round_dir / "stats.json", state.to_json())
        history.append(state)
        before, after = state.pass_at_1_before, state.pass_at_1_after
        if before and after:
            logger.info("round %d: held-out pass@1 %.3f -> %.3f", k, before["pass@1"], after["pass@1"])

    if not worked and rounds.left_as_it_was(output_dir, len(history)):  # a rerun of a finished run
        return Path(current)
    summary = {"rounds": [state.to_json() for state in history], "final_model": str(current)}
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
    """This recipe's command line: its dataclasses (TRL's imported here, when it is built), its default config and
    the errors that are the user's."""
    from trl import ModelConfig, SFTConfig

    return RecipeParser(
        (RejectionSamplingArguments, SFTConfig, ModelConfig), DEFAULT_CONFIG, (ChatTemplateError,), __doc__
    )


def cli(argv: list[str] | None = None) -> Path:
    """`python recipes/rejection_sampling.py ...` as a function: parse `argv` (default sys.argv), then train."""
    return make_parser().run(main, argv)


if __name__ == "__main__":
    cli()
