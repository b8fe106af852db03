"""The two stages of recipes/distill.py: offline (the teacher's verified traces, then SFT of the student) and
on-policy (TRL's DistillationTrainer), each with its own files under output_dir.

`distill_offline` keeps the teacher's traces in `traces.jsonl` with a fingerprint of what made them
(`traces_stats.json`) and the student in `student/` with its own (`fingerprint.json`), so that a rerun
samples and trains again only what its inputs changed (recipes.common.fingerprint). With `tools`, the teacher
samples through TRL's tool loop, each trace is its whole conversation (calls and results), and the student's SFT
renders it with the tool template and trains on the assistant's turns alone (`assistant_only_loss`), as a
rejection-sampling round does (recipes.common.traces.sft_tokenizer). `distill_on_policy`
trains in `on_policy/` with a trl.DistillationConfig made by `on_policy_config` from the YAML's training
options and its `on_policy:` mapping.
"""

from __future__ import annotations

import logging
from dataclasses import fields
from pathlib import Path

from basics.atomic_files import read_json, read_jsonl, write_json, write_jsonl
from recipes.common.checkpoints.resume import train_resuming
from recipes.common.command_line.checks import ConfigError, validate_config
from recipes.common.data import kept_rows_as_conversations
from recipes.common.fingerprint import TRAINING_FIELDS, changes, fields_of, path_identity, sampling_fingerprint, stale
from recipes.common.held_out_eval import evaluate_pass_at_1
from recipes.common.model.loading import load_model, load_tokenizer, save_trainer_for_inference, with_kv_cache
from recipes.common.run_card import write_run_card
from recipes.common.traces import collect_traces, make_trace_sampler, sft_tokenizer
from recipes.common.training.sft_step import train_sft

logger = logging.getLogger(__name__)

# TrainingArguments the on-policy stage takes over from the YAML (the SFT stage's); `on_policy:` overrides them.
INHERITED_TRAINING_ARGS = (
    "per_device_train_batch_size", "gradient_accumulation_steps", "learning_rate", "lr_scheduler_type",
    "warmup_steps", "weight_decay", "max_grad_norm", "max_steps", "num_train_epochs", "logging_steps",
    "save_strategy", "save_steps", "save_total_limit", "seed", "bf16", "fp16", "gradient_checkpointing",
    "report_to", "dataloader_num_workers", "dataloader_pin_memory", "disable_tqdm",
)  # fmt: skip


def on_policy_config(training_args, overrides: dict, output_dir: Path):
    """trl.DistillationConfig: the YAML's training options in INHERITED_TRAINING_ARGS, then `on_policy:`."""
    from trl import DistillationConfig

    known = {f.name for f in fields(DistillationConfig)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ConfigError(f"on_policy: unknown option(s) {unknown}; they must be trl.DistillationConfig fields")
    values = {name: getattr(training_args, name) for name in INHERITED_TRAINING_ARGS}
    values["lr_scheduler_type"] = getattr(values["lr_scheduler_type"], "value", values["lr_scheduler_type"])
    values["save_strategy"] = getattr(values["save_strategy"], "value", values["save_strategy"])
    values.update(overrides)
    values["output_dir"] = str(output_dir)
    values["generation_kwargs"] = with_kv_cache(values.get("generation_kwargs"))
    try:
        config = DistillationConfig(**values)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"on_policy: {error}") from None
    validate_config(config)
    return config


def distill_offline(script_args, training_args, model_args, teacher: str, student: str, rows, eval_rows) -> dict:
    """The teacher's traces (sampled, or reused when nothing changed) and the student fine-tuned on them."""
    output_dir = Path(training_args.output_dir)
    traces_path = output_dir / "traces.jsonl"
    stats = read_json(output_dir / "traces_stats.json")
    fingerprint = {
        "teacher": path_identity(teacher),
        **sampling_fingerprint(script_args, ("verify_traces",)),
        "seed": training_args.seed,
    }
    changed = stale(stats, fingerprint)
    if traces_path.is_file() and stats and not changed:
        logger.info("offline: reusing the teacher's traces in %s", traces_path)
        kept = read_jsonl(traces_path)
    else:
        if changed:
            logger.warning(
                "offline: the traces in %s are stale, sampling them again: %s", traces_path, "; ".join(changed)
            )
        sampler = make_trace_sampler(script_args, teacher)
        logger.info("offline: the teacher writes %d traces for each of %d prompts", script_args.sampling.n, len(rows))
        kept, results = collect_traces(
            sampler, rows, script_args, seed=training_args.seed, require_correct=script_args.verify_traces
        )
        stats = {
            "prompts": len(rows),
            "traces_drawn": sum(result.n for result in results),
            "traces_correct": sum(result.num_correct for result in results),
            "traces_kept": len(kept),
            "prompts_kept": len({row["id"] for row in kept}),
            "verified_only": script_args.verify_traces,
            "teacher_pass@1_on_prompts": sum(r.pass_at(1) for r in results) / max(len(results), 1),
            "teacher_eval": evaluate_pass_at_1(sampler, eval_rows, script_args, training_args.seed),
            "fingerprint": fingerprint,
        }
        sampler.close()
        write_jsonl(traces_path, kept)
        write_json(output_dir / "traces_stats.json", stats)
    logger.info("offline: %d traces kept for %d prompts", stats["traces_kept"], stats["prompts_kept"])
    if not kept:
        raise ValueError(
            "the teacher wrote no trace worth keeping (none verified): check the teacher on these prompts, raise "
            "sampling's n or max_new_tokens, or set verify_traces: false"
        )
    student_dir = output_dir / "student"
    student_fingerprint = {
        "traces": fingerprint,
        "student": path_identity(student),
        "training": fields_of(training_args, TRAINING_FIELDS),
    }
    done = read_json(student_dir / "fingerprint.json")
    changed = changes(done, student_fingerprint) if done or (student_dir / "run_card.json").is_file() else ["none"]
    if not changed:
        logger.info("offline: student already trained in %s, skipped", student_dir)
    else:
        if changed != ["none"]:
            logger.warning(
                "offline: the student in %s is stale, training it again: %s", student_dir, "; ".join(changed)
            )
        train_sft(
            student,
            kept_rows_as_conversations(kept, str(traces_path)),
            training_args,
            model_args,
            output_dir=student_dir,
            # with tools the tool template; without, train_sft loads the student's own, as before tools existed
            tokenizer=sft_tokenizer(script_args, student, training_args, model_args) if script_args.tools else None,
            merge_lora=True,
            card_configs={"script": script_args, "training": training_args, "model": model_args},
            card_extra={"recipe": "distill", "stage": "offline", "teacher": teacher, "traces_kept": len(kept)},
        )
        write_json(student_dir / "fingerprint.json", student_fingerprint)
    return {**stats, "student": str(student_dir)}


def distill_on_policy(script_args, training_args, model_args, teacher: str, student: str, rows) -> dict:
    """The student trained on its own completions against the teacher's distributions, saved in on_policy/."""
    from transformers import set_seed
    from trl import DistillationTrainer, get_peft_config

    output_dir = Path(training_args.output_dir) / "on_policy"
    args = on_policy_config(training_args, script_args.on_policy, output_dir)
    set_seed(args.seed)
    tokenizer = load_tokenizer(student, model_args.model_revision, getattr(model_args, "trust_remote_code", False))
    tokenizer.padding_side = "left"  # the trainer generates: prompts are padded on the left
    trainer = DistillationTrainer(
        model=load_model(student, model_args, args),
        teacher_model=load_model(teacher, model_args, args, trained=False),  # never the student's merged start
        args=args,
        train_dataset=rows.select_columns(["prompt"]),
        processing_class=tokenizer,
        peft_config=get_peft_config(model_args),
    )
    logger.info("on-policy: %s learns from %s on its own completions (beta %.2f)", student, teacher, args.beta)
    train_resuming(trainer, training_args, output_dir)  # the recipe's --resume_from_checkpoint, in on_policy/
    save_trainer_for_inference(trainer, output_dir, tokenizer, merge_lora=True)
    if trainer.accelerator.is_main_process:
        write_run_card(
            output_dir,
            {"script": script_args, "training": args, "model": model_args},
            datasets={"train": rows},
            extra={"recipe": "distill", "stage": "on_policy", "teacher": teacher, "student_start": student,
                   "final_step": trainer.state.global_step},
        )  # fmt: skip
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    return {"model": str(output_dir), "steps": trainer.state.global_step, "losses": losses}
