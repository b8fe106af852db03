"""The student of distillation: a given model, a fresh tiny model, or one cut from the teacher (Minitron's
pruning, prune.py), and the check that student and teacher share one tokenizer. recipes/distill.py tells
the story; `make_student` is how its student is made.
"""

from __future__ import annotations

import logging
from pathlib import Path

from recipes.common.model.loading import resolve_model_path, save_model_for_inference
from tasks.schema import load_rows

logger = logging.getLogger(__name__)


class TokenizerMismatchError(ValueError):
    """Teacher and student do not share a vocabulary, so neither stage can compare or reuse their tokens."""


def check_same_vocabulary(teacher_tokenizer, student_tokenizer, student_name: str) -> None:
    if teacher_tokenizer.get_vocab() != student_tokenizer.get_vocab():
        raise TokenizerMismatchError(
            f"the student ({student_name}) and the teacher have different vocabularies "
            f"({len(student_tokenizer)} vs {len(teacher_tokenizer)} tokens): distillation needs one tokenizer. "
            "Pick a student of the teacher's family (for a Hub teacher, a smaller model that shares its tokenizer); "
            "student_spec builds the tiny architecture, whose tokenizer only the tiny teacher shares."
        )


def build_student(spec: dict, output_dir: Path, seed: int, teacher_tokenizer) -> str:
    """A fresh tiny model of architecture `spec`; refused when the teacher's tokenizer is not the tiny one."""
    from transformers import AutoTokenizer

    from recipes.common.model.tiny import TinyModelSpec, build_tiny_model

    if not (output_dir / "config.json").is_file():
        build_tiny_model(output_dir, seed=seed, spec=TinyModelSpec(**spec))
    check_same_vocabulary(teacher_tokenizer, AutoTokenizer.from_pretrained(output_dir), "student_spec")
    return str(output_dir)


def prune_student(teacher: str, intermediate_size: int, output_dir: Path, calibration_rows: list[dict]) -> str:
    """The teacher with narrower MLPs, ranked on `calibration_rows` (with their reference solutions when they
    have them). Kept when `output_dir` already holds it."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from recipes.stages.distill.prune import prune_mlp_width

    if (output_dir / "config.json").is_file():
        return str(output_dir)
    tokenizer = AutoTokenizer.from_pretrained(teacher)
    model = AutoModelForCausalLM.from_pretrained(teacher)
    texts = []
    for row in calibration_rows:
        solution = row.get("solution")
        if isinstance(solution, str) and solution:
            texts.append(
                tokenizer.apply_chat_template(
                    [*row["prompt"], {"role": "assistant", "content": solution}], tokenize=False
                )
            )
        else:
            texts.append(tokenizer.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True))
    prune_mlp_width(model, tokenizer, texts, intermediate_size)
    save_model_for_inference(model, tokenizer, output_dir)
    logger.info("student cut from the teacher (intermediate_size %d) in %s", intermediate_size, output_dir)
    return str(output_dir)


def make_student(script_args, model_name_or_path: str | None, teacher: str, output_dir: Path) -> str:
    """The student's folder, as `script_args` ask: built from `student_spec`, cut by `student_prune` (in
    `output_dir/student_init`, kept there for a rerun), or `model_name_or_path`; checked to share the
    teacher's vocabulary."""
    from transformers import AutoTokenizer

    teacher_tokenizer = AutoTokenizer.from_pretrained(teacher)
    if script_args.student_spec is not None:
        student = build_student(
            script_args.student_spec, output_dir / "student_init", script_args.student_seed, teacher_tokenizer
        )
        logger.info("fresh student %s in %s", script_args.student_spec, student)
        return student
    if script_args.student_prune is not None:
        calibration = list(load_rows(script_args))[: script_args.prune_calibration_rows]
        size = int(script_args.student_prune["intermediate_size"])
        return prune_student(teacher, size, output_dir / "student_init", calibration)
    student = resolve_model_path(model_name_or_path)
    check_same_vocabulary(teacher_tokenizer, AutoTokenizer.from_pretrained(student), student)
    return student
