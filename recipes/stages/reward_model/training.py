"""The steps of recipes/reward_model.py that load models: the policy's samples, the ORM's training, its scoring.

Each sampled file (`pairs.jsonl`, `eval_pairs.jsonl`, `agreement_samples.jsonl`) is written as soon as it is
sampled, beside `<name>.fingerprint.json` (the policy, the data and the sampling options that made it, and
its stats); a rerun with the same inputs reuses it instead of sampling again. What a pair is and how the
metrics are computed: recipes/stages/reward_model/pairs.py.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from recipes.stages.reward_model.pairs import (
    RewardModelArguments,
    agreement_metrics,
    choose_threshold,
    pairs_of,
    pairwise_accuracy,
    plain_prompt,
    to_preference_dataset,
)


def reuse_or_build(path: Path, fingerprint: dict, build) -> tuple[list[dict], dict, bool]:
    """`(rows, stats, reused)`: the rows of `path` and their stats when `<name>.fingerprint.json` holds this
    fingerprint (the same inputs made them); else those of `build()` (which returns both), written at once."""
    from basics.atomic_files import read_json, read_jsonl, write_json, write_jsonl

    stamp = path.with_name(path.stem + ".fingerprint.json")
    fingerprint = json.loads(json.dumps(fingerprint, default=str))  # as it reads back
    stored = read_json(stamp) or {}
    if path.is_file() and stored.get("fingerprint") == fingerprint:
        return read_jsonl(path), stored.get("stats", {}), True
    rows, stats = build()
    write_jsonl(path, rows)
    write_json(stamp, {"fingerprint": fingerprint, "stats": stats})
    return rows, stats, False


def eval_source(args: RewardModelArguments) -> RewardModelArguments | None:
    """The held-out problems as data options (None when `eval_num_rows` is 0)."""
    if args.eval_num_rows == 0:
        return None
    name = args.eval_dataset_name or args.dataset_name
    return replace(args, dataset_name=name, dataset_split=args.eval_split, dataset_num_rows=args.eval_num_rows)


# ---------------------------------------------------------------- sampling, training, scoring


class PolicySamples:
    """The policy's samples, each scored by its row's verifier; the policy loads on first use, close() frees it."""

    def __init__(self, args: RewardModelArguments, model_path: str | Path):
        self.args, self.model_path, self.sampler = args, model_path, None

    def results(self, rows: list[dict], seed: int, n: int | None = None) -> list:
        from eval.runner import sample_and_score
        from recipes.common.traces import make_trace_sampler

        if self.sampler is None:
            self.sampler = make_trace_sampler(self.args, self.model_path)
        return sample_and_score(self.sampler, rows, self.args.sampling.params(seed, n=n or self.args.sampling.n))

    def pairs(self, rows: list[dict], seed: int) -> tuple[list[dict], dict]:
        args = self.args
        return pairs_of(rows, self.results(rows, seed), args.max_pairs_per_problem, seed, args.require_stop)

    def fresh(self, rows: list[dict], seed: int) -> tuple[list[dict], dict]:
        """`agreement_samples_per_problem` samples of each row, one dict each (prompt, text, verdict, finish)."""
        results = self.results(rows, seed, self.args.agreement_samples_per_problem)
        samples = [
            {"id": row["id"], "prompt": row["prompt"], "difficulty": row.get("difficulty"), **{
                key: sample[key] for key in ("text", "correct", "finish_reason", "num_tokens")
            }}
            for row, result in zip(rows, results, strict=True)
            for sample in result.samples
        ]  # fmt: skip
        correct = sum(sample["correct"] is True for sample in samples)
        return samples, {"samples": len(samples), "correct": correct, "seed": seed}

    def close(self) -> None:
        if self.sampler is not None:
            self.sampler.close()
            self.sampler = None


def train_orm(base_path: str, pairs: list[dict], training_args, model_args, merge_lora: bool = True) -> Path:
    """Train a 1-output sequence classifier on the pairs with TRL's RewardTrainer; save it in output_dir.

    With `use_peft`, the LoRA is a SEQ_CLS adapter whose new `score` head is trained in full (modules_to_save).
    """
    from trl import RewardTrainer, get_peft_config
    from trl.trainer.reward_trainer import DataCollatorForPreference

    from recipes.common.checkpoints.resume import train_resuming
    from recipes.common.model.loading import (
        adapter_base,
        load_model,
        load_tokenizer,
        model_init_kwargs,
        save_trainer_for_inference,
    )

    output_dir = Path(training_args.output_dir)
    tokenizer = load_tokenizer(base_path, model_args.model_revision, getattr(model_args, "trust_remote_code", False))
    if adapter_base(base_path) is not None:  # a LoRA adapter: merged into a plain model, which gets the head
        merged = load_model(base_path, model_args, training_args, trained=False)
        base_path = str(output_dir / "reward_base_merged")
        merged.save_pretrained(base_path)
        tokenizer.save_pretrained(base_path)
    training_args.model_init_kwargs = {
        **model_init_kwargs(model_args, training_args),
        **(training_args.model_init_kwargs or {}),
    }
    peft_config = get_peft_config(model_args)
    if peft_config is not None:
        peft_config.task_type = "SEQ_CLS"
        peft_config.modules_to_save = sorted({*(peft_config.modules_to_save or ()), "score"})
    conversational = bool(getattr(tokenizer, "chat_template", None))
    pad_id = pooling_pad_id(tokenizer, pairs[0], conversational)
    trainer = RewardTrainer(
        model=str(base_path),
        args=training_args,
        data_collator=None if pad_id is None else DataCollatorForPreference(pad_id, training_args.pad_to_multiple_of),
        train_dataset=to_preference_dataset(pairs, conversational),
        processing_class=tokenizer,
        peft_config=peft_config,
    )
    text_config = trainer.model.config.get_text_config()
    if pad_id is not None:
        text_config.pad_token_id = pad_id  # the model's pooling reads the last token that is not this one
    train_resuming(trainer, training_args, output_dir)
    text_config.pad_token_id = tokenizer.pad_token_id  # saved as the tokenizer pads
    return save_trainer_for_inference(trainer, output_dir, tokenizer, merge_lora=merge_lora)


def pooling_pad_id(tokenizer, pair: dict, conversational: bool = True) -> int | None:
    """The id to pad with in training when the texts end with the pad token (pad = EOS and a turn ends with EOS,
    or plain text, to which EOS is added), else None.

    The model's own pooling reads the last token that is not the pad id: with such texts it would train the head
    one token before the end, while the reward's scorer (rewards.learned.reward_models.SequenceScorer) reads the last token.
    Padding with another id (any but that final token) makes training read where the scorer reads.
    """
    pad = tokenizer.pad_token_id
    if conversational:
        turns = [*pair["prompt"], {"role": "assistant", "content": pair["chosen"]}]
        ids = tokenizer.apply_chat_template(turns, tokenize=True, return_dict=True)["input_ids"]
    else:
        ids = tokenizer(plain_prompt(pair["prompt"]) + pair["chosen"] + (tokenizer.eos_token or ""))["input_ids"]
    if pad is None or not ids or ids[-1] != pad:
        return None
    return 0 if ids[-1] != 0 else 1


def score_all(scorer, prompts: list, texts: list[str]) -> list[float]:
    """The ORM's score of each (prompt, completion), each distinct one scored once."""
    keys = [(json.dumps(prompt, sort_keys=True), text) for prompt, text in zip(prompts, texts, strict=True)]
    unique = list(dict.fromkeys(keys))
    if not unique:
        return []
    scores = scorer.score_each([json.loads(prompt) for prompt, _ in unique], [text for _, text in unique])[0]
    by_key = dict(zip(unique, scores, strict=True))
    return [by_key[key] for key in keys]


def evaluate_orm(scorer, args: RewardModelArguments, pairs: list[dict], eval_pairs: list[dict], fresh: list[dict]):
    """orm_metrics.json: pairwise accuracy on the training and held-out pairs, the threshold (set on the training
    pairs), and the verdicts' agreement with the verifier on fresh held-out samples."""

    def pair_scores(rows: list[dict]) -> tuple[list[float], list[float]]:
        prompts = [row["prompt"] for row in rows]
        return score_all(scorer, prompts, [r["chosen"] for r in rows]), score_all(
            scorer, prompts, [r["rejected"] for r in rows]
        )

    chosen, rejected = pair_scores(pairs)
    positive = list(dict(zip(((r["id"], r["chosen"]) for r in pairs), chosen, strict=True)).values())
    negative = list(dict(zip(((r["id"], r["rejected"]) for r in pairs), rejected, strict=True)).values())
    threshold = choose_threshold(positive, negative, args.threshold)
    train_verdicts = agreement_metrics(positive + negative, [True] * len(positive) + [False] * len(negative), threshold)
    metrics = {
        "train": {
            "pairs": len(pairs),
            "pairwise_accuracy": pairwise_accuracy(chosen, rejected),
            "mean_chosen_score": sum(positive) / len(positive),
            "mean_rejected_score": sum(negative) / len(negative),
            "agreement": train_verdicts["agreement"],
        },
        "threshold": {"rule": args.threshold, "value": threshold},
    }
    if eval_pairs:
        held_chosen, held_rejected = pair_scores(eval_pairs)
        metrics["heldout_pairs"] = {
            "pairs": len(eval_pairs),
            "problems": len({row["id"] for row in eval_pairs}),
            "pairwise_accuracy": pairwise_accuracy(held_chosen, held_rejected),
        }
    if fresh:
        judged = [
            s for s in fresh
            if s["correct"] in (True, False) and (s["finish_reason"] == "stop" or not args.require_stop)
        ]  # fmt: skip
        scores = score_all(scorer, [s["prompt"] for s in judged], [s["text"] for s in judged])
        metrics["agreement"] = {
            **agreement_metrics(scores, [s["correct"] for s in judged], threshold),
            "excluded": len(fresh) - len(judged),  # unscorable, or truncated with require_stop
        }
    return metrics


def samples_fingerprint(args: RewardModelArguments, policy: str, seed: int, kind: str) -> dict:
    """What made a sampled file: the policy, the problems, the sampling options, the seed (`kind`: which file)."""
    from recipes.common.fingerprint import SAMPLING_FIELDS, data_fingerprint, fields_of, path_identity

    extra = ("agreement_samples_per_problem",) if kind == "agreement" else ("max_pairs_per_problem",)
    source = args if kind == "train" else eval_source(args)
    return {
        "kind": kind,
        "policy": path_identity(policy),
        "data": data_fingerprint(source),
        "sampling": fields_of(args, SAMPLING_FIELDS + extra),
        "seed": seed,
    }
