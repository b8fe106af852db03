"""Outcome reward model (ORM): the verifier's verdicts on the policy's own samples, learned by a classifier.

    python recipes/reward_model.py                       # embedded default: the tiny cold start, synthetic 5-10
    python recipes/reward_model.py --config recipes/configs/smollm2-135m/reward_model.yaml

1. sample `sampling: {n}` completions per training problem from the policy (model_name_or_path, the
   model whose samples the ORM will judge), each labelled by its row's verifier (eval's sampler and scoring);
2. pair them: chosen = a correct completion, rejected = a wrong one of the SAME prompt, at most
   `max_pairs_per_problem` per problem, drawn at random (seeded by the seed and the problem id); a problem
   with only correct or only wrong samples gives none; with `require_stop` a completion cut at the length
   limit is neither (recipes/stages/reward_model/pairs.py says why). `pairs.jsonl` is written at once, and a rerun with the
   same policy, data and sampling options reuses it;
3. train a one-output sequence classifier on the pairs with TRL's RewardTrainer (Bradley-Terry loss) from
   `reward_base` (default: the policy itself, with a new head); with `use_peft`, a SEQ_CLS LoRA whose head is
   trained in full, saved merged (a plain model) unless `merge_lora: false` (then the adapter alone). The
   model and its tokenizer are saved in output_dir: AutoModelForSequenceClassification.from_pretrained loads
   it, and the `reward_model` reward scores with it;
4. evaluate with that reward's own scorer (rewards.learned.reward_models.SequenceScorer), so the numbers are the reward's:
   pairwise accuracy on pairs of held-out problems built the same way; the verdict `score > threshold`, the
   threshold set on the training pairs (`threshold`: the accuracy-maximising cut, or the midpoint of the mean
   chosen and rejected scores); on fresh samples of the held-out problems (seed + 1), the verdicts' agreement
   with the verifier, the AUC of the score, and the policy's accuracy on them (the base rate: always giving
   the majority verdict agrees max(p, 1 - p)).
`orm_metrics.json` (logged too) and `run_card.json` in output_dir hold the results.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

if __package__ in (None, ""):  # run by path: this checkout on sys.path, with or without the venv
    import _checkout  # noqa: F401  (recipes/_checkout.py, beside this file)

from basics.atomic_files import write_json
from recipes.common.command_line.checks import require_single_process
from recipes.common.command_line.config import RecipeParser
from recipes.common.model.loading import resolve_model_path
from recipes.common.run_card import write_run_card
from recipes.stages.reward_model.pairs import NoPairsError, RewardModelArguments
from recipes.stages.reward_model.training import (
    PolicySamples,
    eval_source,
    evaluate_orm,
    reuse_or_build,
    samples_fingerprint,
    train_orm,
)
from tasks.schema import load_rows

logger = logging.getLogger("recipes.reward_model")

DEFAULT_CONFIG = "demo/reward_model.yaml"


def main(script_args: RewardModelArguments, training_args, model_args) -> Path:
    """Sample, pair, train, evaluate; returns the folder of the trained ORM (output_dir)."""
    from transformers import set_seed

    from rewards.learned.reward_models import SequenceScorer

    require_single_process("reward_model")
    set_seed(training_args.seed)
    if_missing = script_args.missing_model_fallback()
    policy = resolve_model_path(model_args.model_name_or_path, if_missing=if_missing)
    reward_base = resolve_model_path(script_args.reward_base or policy)
    rows = list(load_rows(script_args))
    held_out = eval_source(script_args)
    eval_rows = list(load_rows(held_out)) if held_out else []
    if held_out and not script_args.eval_dataset_name and Path(script_args.dataset_name).expanduser().exists():
        logger.warning("no eval_dataset_name: a local source has no held-out split, so the held-out metrics are "
                       "measured on the training file itself; set eval_dataset_name")  # fmt: skip
    output_dir, seed = Path(training_args.output_dir), training_args.seed
    logger.info("%d training problems from %s, %d held out", len(rows), script_args.dataset_name, len(eval_rows))

    samples = PolicySamples(script_args, policy)

    def cached(name: str, kind: str, build) -> tuple[list[dict], dict]:
        fingerprint = samples_fingerprint(script_args, policy, seed, kind)
        found, stats, reused = reuse_or_build(output_dir / name, fingerprint, build)
        logger.info("%s%s: %s", output_dir / name, " (reused: same inputs)" if reused else "", stats)
        return found, stats

    try:
        pairs, pair_stats = cached("pairs.jsonl", "train", lambda: samples.pairs(rows, seed))
        if not pairs:
            raise NoPairsError(pair_stats)
        eval_pairs, eval_stats, fresh, fresh_stats = [], {}, [], {}
        if eval_rows:
            eval_pairs, eval_stats = cached("eval_pairs.jsonl", "eval", lambda: samples.pairs(eval_rows, seed))
        if eval_rows and script_args.agreement_samples_per_problem:
            fresh, fresh_stats = cached(
                "agreement_samples.jsonl", "agreement", lambda: samples.fresh(eval_rows, seed + 1)
            )
    finally:
        samples.close()  # the policy's memory back before the ORM trains

    model_dir = train_orm(reward_base, pairs, training_args, model_args, merge_lora=script_args.merge_lora)
    scorer = SequenceScorer(
        [str(model_dir)],
        device=str(training_args.device),
        batch_size=script_args.scoring_batch_size,
        max_length=training_args.max_length or 2048,
    )
    metrics = {
        "policy": policy,
        "reward_base": reward_base,
        "model": str(model_dir),
        **evaluate_orm(scorer, script_args, pairs, eval_pairs, fresh),
        "sampling": {"train": pair_stats, "heldout_pairs": eval_stats, "agreement": fresh_stats},
    }
    write_json(output_dir / "orm_metrics.json", metrics)
    logger.info("ORM metrics (%s): %s", output_dir / "orm_metrics.json", json.dumps(metrics))
    write_run_card(
        output_dir,
        {"script": script_args, "training": training_args, "model": model_args},
        datasets={"train": rows, "eval": eval_rows},
        extra={"recipe": "reward_model", "base_model": reward_base, "policy": policy, "metrics": metrics},
    )
    return model_dir


def make_parser() -> RecipeParser:
    """This recipe's command line: its dataclasses (TRL's imported here, when it is built), its default config and
    the errors that are the user's."""
    from trl import ModelConfig, RewardConfig

    return RecipeParser((RewardModelArguments, RewardConfig, ModelConfig), DEFAULT_CONFIG, (NoPairsError,), __doc__)


def cli(argv: list[str] | None = None) -> Path:
    """`python recipes/reward_model.py ...` as a function: parse `argv` (default sys.argv), then train."""
    return make_parser().run(main, argv)


if __name__ == "__main__":
    cli()
