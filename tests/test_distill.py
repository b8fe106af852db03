"""recipes/distill.py on CPU: offline distillation of a trained tiny teacher into a smaller, untrained student
gives the student a clearly non-zero pass@1; the on-policy stage (TRL's DistillationTrainer) runs a few steps.

The teacher is tests/support/guessing_model.py (it answers \\boxed{7} or \\boxed{3}, about half the time each)
on problems whose gold answer is 7: with the verification filter only its correct traces reach the student,
so a student that learned them passes well above the teacher's one in two. (A teacher that has the lookup
skill takes about 1000 SFT steps to build, too slow for the suite; docs/distillation.md reports the recipe on one.)
"""

from __future__ import annotations

import json
import math

import pytest
from transformers import AutoModelForCausalLM

from basics.atomic_files import read_jsonl, write_jsonl
from recipes import distill
from recipes.stages.distill.stages import on_policy_config
from rewards.math import verify
from tests.support.guessing_model import rows_with_gold

STUDENT = '{"hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 2, "num_hidden_layers": 1}'


def parse(*argv: str):
    return distill.make_parser().parse_args(list(argv))


def test_offline_then_on_policy_distillation_into_a_smaller_fresh_student(guessing_model_dir, tmp_path):
    write_jsonl(tmp_path / "train.jsonl", rows_with_gold("7", "train", 1500))
    write_jsonl(tmp_path / "eval.jsonl", rows_with_gold("7", "eval", 1000))
    out = tmp_path / "distill"
    argv = (
        "--teacher_model_name_or_path", str(guessing_model_dir), "--demo_model_if_missing", "false",
        "--student_spec", STUDENT, "--mode", "both", "--output_dir", str(out),
        "--dataset_name", str(tmp_path / "train.jsonl"), "--eval_dataset_name", str(tmp_path / "eval.jsonl"),
        "--sampling", "{n: 4, max_new_tokens: 16}", "--max_per_problem", "1",
        "--eval_samples_per_problem", "8", "--max_steps", "100", "--learning_rate", "1e-2", "--warmup_steps", "0",
        "--per_device_train_batch_size", "16", "--logging_steps", "20",
        "--on_policy", '{"max_steps": 2, "max_completion_length": 16, "per_device_train_batch_size": 8, "logging_steps": 1, "learning_rate": 1e-4}',
    )  # fmt: skip
    final = distill.main(*parse(*argv))

    stats = json.loads((out / "distill_stats.json").read_text())
    teacher = AutoModelForCausalLM.from_pretrained(guessing_model_dir)
    student = AutoModelForCausalLM.from_pretrained(out / "student")
    assert student.num_parameters() < teacher.num_parameters() / 10  # a much smaller student
    assert stats["student_before"]["pass@1"] == 0.0  # untrained: it never writes an answer
    assert 0.3 < stats["offline"]["teacher_eval"]["pass@1"] < 0.7  # the teacher guesses
    assert stats["offline"]["student_eval"]["pass@1"] > 0.7, stats["offline"]  # above the teacher: verified traces only

    traces = read_jsonl(out / "traces.jsonl")
    golds = {json.dumps(row["prompt"]): row["answer"] for row in read_jsonl(tmp_path / "train.jsonl")}
    assert len(traces) == stats["offline"]["traces_kept"] and len({row["id"] for row in traces}) == len(traces)
    assert all(verify(golds[json.dumps(row["prompt"])], row["solution"]).correct is True for row in traces)

    on_policy = stats["on_policy"]
    assert final == out / "on_policy" and on_policy["steps"] == 2
    assert on_policy["losses"] and all(math.isfinite(loss) for loss in on_policy["losses"])
    assert AutoModelForCausalLM.from_pretrained(final).config.use_cache is True
    assert json.loads((final / "run_card.json").read_text())["stage"] == "on_policy"
    card = json.loads((out / "run_card.json").read_text())
    assert card["recipe"] == "distill" and card["final_student"] == str(final)

    # Resumed after the end (a preemptible job's relaunch line): left as it is, the same final student (issue 57).
    files = {path: path.read_bytes() for path in sorted(out.rglob("*")) if path.is_file()}
    assert distill.main(*parse(*argv, "--resume_from_checkpoint", "true")) == final
    assert {path: path.read_bytes() for path in sorted(out.rglob("*")) if path.is_file()} == files


def test_options_are_checked_with_their_names(tmp_path):
    with pytest.raises(ValueError, match="mode"):
        parse("--mode", "online")
    with pytest.raises(ValueError, match="student_spec.*hidden"):
        parse("--student_spec", '{"hiden_size": 64}')
    with pytest.raises(ValueError, match="teacher_model_name_or_path"):
        parse("--teacher_model_name_or_path", "")
    with pytest.raises(ValueError, match="student_spec and student_prune"):
        parse("--student_prune", '{"intermediate_size": 64}')  # the demo YAML sets student_spec
    with pytest.raises(ValueError, match="intermediate_size"):
        parse("--student_spec", "null", "--student_prune", '{"width": 64}')
    _, training_args, _ = parse()
    with pytest.raises(ValueError, match="on_policy.*lmbda"):
        on_policy_config(training_args, {"lmbda": 0.5}, tmp_path)
    config = on_policy_config(training_args, {"beta": 0.2}, tmp_path)
    assert config.beta == 0.2 and config.learning_rate == training_args.learning_rate  # inherited from the YAML
    assert config.generation_kwargs["use_cache"] is True


def test_a_student_cut_from_the_teacher_is_smaller_and_keeps_its_vocabulary(guessing_model_dir, tmp_path):
    write_jsonl(tmp_path / "train.jsonl", rows_with_gold("7", "train", 600))
    out = tmp_path / "distill"
    args = parse(
        "--teacher_model_name_or_path", str(guessing_model_dir), "--demo_model_if_missing", "false",
        "--student_spec", "null", "--student_prune", '{"intermediate_size": 32}', "--mode", "offline",
        "--output_dir", str(out), "--dataset_name", str(tmp_path / "train.jsonl"), "--eval_samples_per_problem", "0",
        "--sampling", "{n: 1, max_new_tokens: 16}", "--max_steps", "2",
        "--per_device_train_batch_size", "8",
    )  # fmt: skip
    final = distill.main(*args)
    teacher = AutoModelForCausalLM.from_pretrained(guessing_model_dir)
    student = AutoModelForCausalLM.from_pretrained(final)
    assert student.config.intermediate_size == 32 < teacher.config.intermediate_size
    assert student.num_parameters() < teacher.num_parameters()
    assert student.config.hidden_size == teacher.config.hidden_size  # only the MLP width was cut
    stats = json.loads((out / "distill_stats.json").read_text())
    assert stats["student_prune"] == {"intermediate_size": 32} and stats["final_student"] == str(final)
