"""Distillation: a teacher's reasoning into a student, offline (teacher traces -> SFT) and on-policy (TRL).

    python recipes/distill.py                                  # embedded default: tiny teacher -> smaller student
    python recipes/distill.py --config recipes/configs/demo/distill.yaml --mode on_policy

How most small reasoning models are made (DeepSeek-R1-Distill-*: 800k R1 traces, plain SFT, no RL).
`mode` chooses the stages:
* `offline`: the teacher (a local folder or a Hub name; sampled with transformers or vLLM) writes
  `samples_per_problem` traces per prompt -> with `verify_traces`, only the verified ones are kept, as R1
  did (recipes/common/traces.py: distinct, at most `max_per_problem` per prompt) -> the student is
  fine-tuned on them (recipes.common.sft_training.train_sft, the step sft.py runs);
* `on_policy`: TRL's DistillationTrainer (Agarwal et al. 2024, "On-policy distillation"): the student
  writes the completions and learns the teacher's next-token distribution on them (generalised JSD;
  `beta` 0 = forward KL, 1 = reverse KL). Options under `on_policy:` in the YAML;
* `both`: offline first, then on-policy from the offline student.
The student is `model_name_or_path`, or, with `student_spec`, a fresh tiny model of that architecture
(TinyModelSpec fields). Student and teacher must share the tokenizer: the on-policy loss compares their
distributions token by token, and the offline traces are the teacher's text rendered by the student's
chat template. Outputs: `traces.jsonl`, `student/` (offline), `on_policy/`, `distill_stats.json` and `run_card.json`.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repo's packages importable without an install
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from recipes.common.checks import ConfigError, require_single_process, validate_config
from recipes.common.config import RecipeParser, mapping_option
from recipes.common.fingerprint import (
    SAMPLING_FIELDS,
    TRAINING_FIELDS,
    changes,
    data_fingerprint,
    fields_of,
    path_identity,
)
from recipes.common.model import load_model, load_tokenizer, resolve_model_path, save_for_inference
from recipes.common.run_card import write_run_card
from recipes.common.sft_training import ChatTemplateError, check_chat_template, train_sft
from recipes.common.student import TokenizerMismatchError, build_student, check_same_vocabulary, prune_student
from recipes.common.traces import (
    TraceArguments,
    collect_traces,
    evaluate_pass_at_1,
    load_eval_rows,
    make_trace_sampler,
    to_conversations,
)
from tasks.files import read_json, read_jsonl, write_json, write_jsonl
from tasks.schema import DataArguments, load_rows

logger = logging.getLogger("recipes.distill")

DEFAULT_CONFIG = "demo/distill.yaml"
MODES = ("offline", "on_policy", "both")
# TrainingArguments the on-policy stage takes over from the YAML (the SFT stage's); `on_policy:` overrides them.
INHERITED_TRAINING_ARGS = (
    "per_device_train_batch_size", "gradient_accumulation_steps", "learning_rate", "lr_scheduler_type",
    "warmup_steps", "weight_decay", "max_grad_norm", "max_steps", "num_train_epochs", "logging_steps",
    "save_strategy", "save_steps", "save_total_limit", "seed", "bf16", "fp16", "gradient_checkpointing",
    "report_to", "dataloader_num_workers", "dataloader_pin_memory", "disable_tqdm",
)  # fmt: skip


@dataclass
class DistillScriptArguments(TraceArguments, DataArguments):
    mode: str = field(default="offline", metadata={"help": "'offline', 'on_policy', or 'both' (offline first)."})
    teacher_model_name_or_path: str | None = field(
        default=None, metadata={"help": "The teacher: a folder saved with save_pretrained or a Hub model name."}
    )
    teacher_cold_start_if_missing: bool = field(
        default=False,
        metadata={"help": "If the teacher folder does not exist, first run recipes/sft.py's embedded default there."},
    )
    verify_traces: bool = field(
        default=True, metadata={"help": "Keep only traces the row's verifier accepts (R1's distillation data)."}
    )
    student_spec: dict | str | None = field(
        default=None,
        metadata={
            "help": "Build a fresh tiny student with this architecture (recipes.common.tiny_model.TinyModelSpec "
            "fields, e.g. {hidden_size: 64, intermediate_size: 256}) instead of loading model_name_or_path."
        },
    )
    student_seed: int = field(default=0, metadata={"help": "Seed of a fresh student's initial weights."})
    student_prune: dict | str | None = field(
        default=None,
        metadata={
            "help": "Cut the student from the teacher instead (Minitron): {intermediate_size: N} keeps each MLP's N "
            "most active neurons, measured on `prune_calibration_rows` prompts (recipes/common/prune.py)."
        },
    )
    prune_calibration_rows: int = field(default=512, metadata={"help": "Rows whose activations rank the neurons."})
    on_policy: dict | str | None = field(
        default=None,
        metadata={
            "help": "trl.DistillationConfig options of the on-policy stage (beta, max_completion_length, "
            "temperature, max_steps, learning_rate, ...); unset ones come from this YAML's training options."
        },
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        self.student_spec = mapping_option(self.student_spec, "student_spec")
        self.student_prune = mapping_option(self.student_prune, "student_prune")
        if self.student_prune is not None:
            if self.student_spec is not None:
                raise ValueError("student_spec and student_prune both build the student: set one of them")
            if set(self.student_prune) != {"intermediate_size"}:
                raise ValueError(f"student_prune takes {{intermediate_size: N}}, got {self.student_prune}")
        self.on_policy = mapping_option(self.on_policy, "on_policy") or {}
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if not self.teacher_model_name_or_path:
            raise ValueError("teacher_model_name_or_path is required: the model whose reasoning is distilled")
        if self.student_spec is not None:
            from recipes.common.tiny_model import TinyModelSpec

            known = {f.name for f in fields(TinyModelSpec)}
            unknown = sorted(set(self.student_spec) - known)
            if unknown:
                raise ValueError(f"student_spec: unknown option(s) {unknown}; TinyModelSpec has {sorted(known)}")


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
    # transformers trainers turn the KV cache off for training and generation would inherit it (10x slower)
    values["generation_kwargs"] = {"use_cache": True, **(values.get("generation_kwargs") or {})}
    try:
        config = DistillationConfig(**values)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"on_policy: {error}") from None
    validate_config(config)
    return config


def distill_offline(script_args, training_args, model_args, teacher: str, student: str, rows, eval_rows) -> dict:
    output_dir = Path(training_args.output_dir)
    traces_path = output_dir / "traces.jsonl"
    stats = read_json(output_dir / "traces_stats.json")
    fingerprint = {
        "teacher": path_identity(teacher),
        "data": data_fingerprint(script_args),
        "sampling": fields_of(script_args, SAMPLING_FIELDS + ("verify_traces", "sampling_backend")),
        "seed": training_args.seed,
    }
    stale = changes(stats.get("fingerprint"), fingerprint) if stats else []
    if traces_path.is_file() and stats and not stale:
        logger.info("offline: reusing the teacher's traces in %s", traces_path)
        kept = read_jsonl(traces_path)
    else:
        if stale:
            logger.warning(
                "offline: the traces in %s are stale, sampling them again: %s", traces_path, "; ".join(stale)
            )
        sampler = make_trace_sampler(script_args, teacher)
        logger.info(
            "offline: the teacher writes %d traces for each of %d prompts", script_args.samples_per_problem, len(rows)
        )
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
            "samples_per_problem or sample_max_new_tokens, or set verify_traces: false"
        )
    student_dir = output_dir / "student"
    student_fingerprint = {
        "traces": fingerprint,
        "student": path_identity(student),
        "training": fields_of(training_args, TRAINING_FIELDS),
    }
    done = read_json(student_dir / "fingerprint.json")
    stale = changes(done, student_fingerprint) if done or (student_dir / "run_card.json").is_file() else ["none"]
    if not stale:
        logger.info("offline: student already trained in %s, skipped", student_dir)
    else:
        if stale != ["none"]:
            logger.warning("offline: the student in %s is stale, training it again: %s", student_dir, "; ".join(stale))
        train_sft(
            student,
            to_conversations(kept, str(traces_path)),
            training_args,
            model_args,
            output_dir=student_dir,
            merge_lora=True,
            card_configs={"script": script_args, "training": training_args, "model": model_args},
            card_extra={"recipe": "distill", "stage": "offline", "teacher": teacher, "traces_kept": len(kept)},
        )
        write_json(student_dir / "fingerprint.json", student_fingerprint)
    return {**stats, "student": str(student_dir)}


def distill_on_policy(script_args, training_args, model_args, teacher: str, student: str, rows) -> dict:
    from transformers import set_seed
    from trl import DistillationTrainer, get_peft_config

    output_dir = Path(training_args.output_dir) / "on_policy"
    args = on_policy_config(training_args, script_args.on_policy, output_dir)
    set_seed(args.seed)
    tokenizer = load_tokenizer(student, model_args.model_revision, getattr(model_args, "trust_remote_code", False))
    tokenizer.padding_side = "left"  # the trainer generates: prompts are padded on the left
    trainer = DistillationTrainer(
        model=load_model(student, model_args, args),
        teacher_model=load_model(teacher, model_args, args),
        args=args,
        train_dataset=rows.select_columns(["prompt"]),
        processing_class=tokenizer,
        peft_config=get_peft_config(model_args),
    )
    logger.info("on-policy: %s learns from %s on its own completions (beta %.2f)", student, teacher, args.beta)
    trainer.train()
    save_for_inference(trainer, output_dir, tokenizer, merge_lora=True)
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


def main(script_args: DistillScriptArguments, training_args, model_args) -> Path:
    """Run the chosen stages; returns the folder of the final student."""
    from accelerate import PartialState
    from transformers import AutoTokenizer, set_seed

    state = PartialState(cpu=bool(getattr(training_args, "use_cpu", False)))
    if script_args.mode != "on_policy":
        require_single_process("distill")  # the teacher's sampling runs in one process
    elif state.num_processes > 1 and script_args.eval_samples_per_problem:
        logger.warning("on-policy stage on %d processes: held-out evaluation is off", state.num_processes)
        script_args.eval_samples_per_problem = 0
    if script_args.mode != "offline":  # its options checked now, not after the offline stage
        on_policy_config(training_args, script_args.on_policy, Path(training_args.output_dir) / "on_policy")
    set_seed(training_args.seed)
    teacher = script_args.teacher_model_name_or_path
    teacher = resolve_model_path(
        teacher, if_missing="cold_start" if script_args.teacher_cold_start_if_missing else None
    )
    teacher_tokenizer = AutoTokenizer.from_pretrained(teacher)
    output_dir = Path(training_args.output_dir)
    if script_args.student_spec is not None:
        student = build_student(
            script_args.student_spec, output_dir / "student_init", script_args.student_seed, teacher_tokenizer
        )
        logger.info("fresh student %s in %s", script_args.student_spec, student)
    elif script_args.student_prune is not None:
        calibration = list(load_rows(script_args))[: script_args.prune_calibration_rows]
        size = int(script_args.student_prune["intermediate_size"])
        student = prune_student(teacher, size, output_dir / "student_init", calibration)
    else:
        student = resolve_model_path(model_args.model_name_or_path)
        check_same_vocabulary(teacher_tokenizer, AutoTokenizer.from_pretrained(student), student)
    check_chat_template(load_tokenizer(student), training_args)

    rows = load_rows(script_args)
    eval_rows = load_eval_rows(script_args)
    logger.info("%d prompts from %s, %d held out", len(rows), script_args.dataset_name, len(eval_rows))
    report: dict = {
        "teacher": teacher, "mode": script_args.mode,
        "student_spec": script_args.student_spec, "student_prune": script_args.student_prune,
    }  # fmt: skip
    # one sample per problem: a reference point (an untrained student rarely stops, so its samples are long)
    report["student_before"] = _evaluate(script_args, student, eval_rows, training_args.seed, n=1)
    if script_args.mode in ("offline", "both"):
        report["offline"] = distill_offline(
            script_args, training_args, model_args, teacher, student, list(rows), eval_rows
        )
        student = report["offline"]["student"]
        report["offline"]["student_eval"] = _evaluate(script_args, student, eval_rows, training_args.seed)
    if script_args.mode in ("on_policy", "both"):
        report["on_policy"] = distill_on_policy(script_args, training_args, model_args, teacher, student, rows)
        student = report["on_policy"]["model"]
        report["on_policy"]["student_eval"] = _evaluate(script_args, student, eval_rows, training_args.seed)
    report["final_student"] = student
    if state.is_main_process:
        write_json(output_dir / "distill_stats.json", report)
        write_run_card(
            output_dir,
            {"script": script_args, "training": training_args, "model": model_args},
            datasets={"prompts": rows},
            extra={"recipe": "distill", **report},
        )
    for stage in ("offline", "on_policy"):
        evaluation = (report.get(stage) or {}).get("student_eval")
        if evaluation:
            logger.info("%s: student held-out pass@1 %.3f", stage, evaluation["pass@1"])
    return Path(student)


def _evaluate(script_args, model_path: str, eval_rows, seed: int, n: int | None = None) -> dict | None:
    if not eval_rows or script_args.eval_samples_per_problem == 0:
        return None
    sampler = make_trace_sampler(script_args, model_path)
    try:
        return evaluate_pass_at_1(sampler, eval_rows, script_args, seed, n)
    finally:
        sampler.close()


def make_parser() -> RecipeParser:
    """This recipe's command line: its dataclasses, its default config and the errors that are the user's."""
    from trl import ModelConfig, SFTConfig

    return RecipeParser(
        (DistillScriptArguments, SFTConfig, ModelConfig),
        DEFAULT_CONFIG,
        user_errors=(ChatTemplateError, TokenizerMismatchError),
    )


def cli(argv: list[str] | None = None) -> Path:
    """`python recipes/distill.py ...` as a function: parse `argv` (default sys.argv), then train."""
    return make_parser().run(main, argv)


if __name__ == "__main__":
    cli()
