"""Sample every row, verify, keep (steps 1-4 of recipes.common.traces), and the rows that become SFT data."""

from __future__ import annotations

import json
from pathlib import Path

from eval.runner import sample_and_score
from recipes.common.traces.hints import add_answer_hint, mentions_hint
from recipes.common.traces.keep import select_samples
from recipes.common.traces.options import TraceArguments
from recipes.common.traces.reward_scores import score_with_reward_model
from rewards.verdicts import verifier_of


def make_trace_sampler(args: TraceArguments, model_path: str | Path):
    from eval.sampler import make_sampler

    if getattr(args, "tools", None):  # TRL's tool loop, as GRPO trains (eval/tools/trl_sampling.py)
        from eval.tools.trl_sampling import make_tool_sampler

        return make_tool_sampler(
            str(model_path), args.tools, args.tool_options, args.max_tool_calling_iterations,
            batch_size=args.sampling.batch_size,
        )  # fmt: skip
    return make_sampler(args.sampling.backend, str(model_path), batch_size=args.sampling.batch_size)


def sft_tokenizer(args, model_path: str | Path, training_args, model_args):
    """The tokenizer that fine-tunes `model_path` on the kept rows (a rejection-sampling round, distillation's
    student): the model's own, or, sampled with `tools`, one whose template renders the kept conversations' calls and
    results (eval.tools.chat_template) with loss markers. Tool traces need `assistant_only_loss: true`: split at the
    last turn instead, the calls (every assistant turn but the last) would be out of the loss. ChatTemplateError (one
    line, exit code 2) without it, or where no tool template fits the tokenizer."""
    from recipes.common.model.loading import load_tokenizer
    from recipes.common.training.sft_step import ChatTemplateError

    tokenizer = load_tokenizer(
        str(model_path), model_args.model_revision, getattr(model_args, "trust_remote_code", False)
    )
    if not getattr(args, "tools", None):
        return tokenizer
    if not getattr(training_args, "assistant_only_loss", False):
        raise ChatTemplateError(
            "tools: the kept traces are conversations with tool calls; set assistant_only_loss: true so that SFT "
            "trains on every assistant turn (the calls too) and not on the tools' results"
        )
    from eval.tools.chat_template import with_tool_template

    try:
        return with_tool_template(tokenizer)
    except ValueError as error:
        raise ChatTemplateError(f"tools: {error}") from None


def _training_row(row: dict, sample: dict, rationalized: bool, tools_json: str | None = None) -> dict:
    if "conversation" in sample:  # sampled with tools: the whole conversation, tool calls and results included
        return {
            **_training_row(row, {key: value for key, value in sample.items() if key != "conversation"}, rationalized),
            "messages": [*row["prompt"], *sample["conversation"]],  # SFTTrainer's conversational form
            "tools": tools_json,  # the tools' JSON schemas, as SFTTrainer reads a `tools` column
            "tool_calls": sample.get("tool_calls"),
        }
    return {
        "id": row["id"],
        "prompt": row["prompt"],  # always the original prompt: a rationalised sample is stored without its hint
        "solution": sample["text"],
        "answer": row.get("answer"),
        "verifier": verifier_of(row),
        "difficulty": row.get("difficulty"),
        "num_tokens": sample.get("num_tokens"),
        "correct": sample.get("correct"),
        "reward_score": sample.get("reward_score"),  # keep_reward_model's score, when one scored the samples
        "rationalized": rationalized,
    }


def collect_traces(
    sampler,
    rows: list[dict],
    args: TraceArguments,
    seed: int,
    require_correct: bool = True,
    hint_template: str | None = None,
    progress: bool = True,
) -> tuple[list[dict], list]:
    """Sample every row, keep by the rule above; returns `(kept training rows, eval.runner results)`.

    With `hint_template`, each row is sampled with its gold answer as a hint, and kept samples are
    rationalisations: they must be verified and must not quote the hint; they carry the original prompt.
    """
    rows = list(rows)
    sampled_rows = rows
    if hint_template is not None:
        sampled_rows = [
            {**row, "id": f"{row['id']}#hint", "prompt": add_answer_hint(row["prompt"], row["answer"], hint_template)}
            for row in rows
        ]
    results = sample_and_score(sampler, sampled_rows, args.sampling.params(seed), progress=progress)
    if args.keep_reward_model:
        score_with_reward_model(sampler, rows, results, args.keep_reward_model)
    by_verifier = args.keep_by != "reward_model"
    schemas = getattr(sampler, "schemas", None)  # a tool sampler: the schemas its model saw
    tools_json = json.dumps(schemas(args.sampling.params(seed))) if schemas is not None else None
    kept = []
    for row, result in zip(rows, results, strict=True):
        samples = result.samples
        if hint_template is not None:
            samples = [s for s in samples if not mentions_hint(s["text"], row["answer"], hint_template)]
        chosen = select_samples(
            samples,
            args.max_per_problem,
            args.selection,
            seed=seed,
            problem_id=row["id"],
            require_correct=(require_correct and by_verifier) or hint_template is not None,
            require_stop=args.require_stop,
            min_score=args.keep_min_score if args.keep_by != "verifier" else None,
        )
        kept += [_training_row(row, sample, hint_template is not None, tools_json) for sample in chosen]
    return kept, results


def solved_ids(results) -> set[str]:
    """Ids of problems with at least one verified completion."""
    return {result.id for result in results if result.num_correct > 0}
