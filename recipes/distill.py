"""Distillation: a teacher's reasoning into a student, offline (teacher traces -> SFT) and on-policy (TRL).

    python recipes/distill.py                                  # embedded default: tiny teacher -> smaller student
    python recipes/distill.py --config recipes/configs/demo/distill.yaml --mode on_policy

How most small reasoning models are made (DeepSeek-R1-Distill-*: 800k R1 traces, plain SFT, no RL).
`mode` chooses the stages (recipes/stages/distill/stages.py):
* `offline`: the teacher (a local folder or a Hub name; sampled with transformers or vLLM) writes
  `sampling: {n}` traces per prompt -> with `verify_traces`, only the verified ones are kept, as R1
  did (recipes/common/traces/: distinct, at most `max_per_problem` per prompt) -> the student is
  fine-tuned on them (recipes.common.training.sft_step.train_sft, the step sft.py runs);
* `on_policy`: TRL's DistillationTrainer (Agarwal et al. 2024, "On-policy distillation"): the student
  writes the completions and learns the teacher's next-token distribution on them (generalised JSD;
  `beta` 0 = forward KL, 1 = reverse KL). Options under `on_policy:` in the YAML;
* `both`: offline first, then on-policy from the offline student.
The student (recipes/stages/distill/student.py) is `model_name_or_path`, or a fresh tiny model of architecture
`student_spec` (TinyModelSpec fields), or the teacher cut narrower by `student_prune`. Student and
teacher must share the tokenizer: the on-policy loss compares their distributions token by token, and the
offline traces are the teacher's text rendered by the student's chat template. Top to bottom: parse,
check the launch and the on-policy options, make the student, load the rows, evaluate the student, run
the stages, write `distill_stats.json` and `run_card.json` (the stages write `traces.jsonl`, `student/`
and `on_policy/`).
"""

from __future__ import annotations

import logging
from pathlib import Path

if __package__ in (None, ""):  # run by path: this checkout on sys.path, with or without the venv
    import _checkout  # noqa: F401  (recipes/_checkout.py, beside this file)

from basics.atomic_files import read_json, write_json
from recipes.common.checkpoints.resume import finished_run
from recipes.common.command_line.checks import require_single_process
from recipes.common.command_line.config import RecipeParser
from recipes.common.held_out_eval import evaluate_model, load_eval_rows
from recipes.common.model.loading import resolve_model_path
from recipes.common.run_card import write_run_card
from recipes.common.traces import sft_tokenizer
from recipes.common.training.sft_step import ChatTemplateError, check_chat_template
from recipes.stages.distill.arguments import DistillScriptArguments
from recipes.stages.distill.stages import distill_offline, distill_on_policy, on_policy_config
from recipes.stages.distill.student import TokenizerMismatchError, make_student
from tasks.schema import load_rows

logger = logging.getLogger("recipes.distill")

DEFAULT_CONFIG = "demo/distill.yaml"


def main(script_args: DistillScriptArguments, training_args, model_args) -> Path:
    """Run the chosen stages; returns the folder of the final student."""
    from accelerate import PartialState
    from transformers import set_seed

    state = PartialState(cpu=bool(getattr(training_args, "use_cpu", False)))
    if script_args.mode != "on_policy":
        require_single_process("distill")  # the teacher's sampling runs in one process
    elif state.num_processes > 1 and script_args.eval_samples_per_problem:
        logger.warning("on-policy stage on %d processes: held-out evaluation is off", state.num_processes)
        script_args.eval_samples_per_problem = 0
    output_dir = Path(training_args.output_dir)
    stages = {}  # stage -> (its folder, its training options)
    if script_args.mode != "on_policy":
        stages["offline"] = (output_dir / "student", training_args)
    if script_args.mode != "offline":  # its options checked now, not after the offline stage
        stages["on_policy"] = (
            output_dir / "on_policy",
            on_policy_config(training_args, script_args.on_policy, output_dir / "on_policy"),
        )
    if finished := _finished(output_dir, stages, training_args.resume_from_checkpoint):
        logger.info(finished)
        return Path(read_json(output_dir / "distill_stats.json")["final_student"])
    set_seed(training_args.seed)
    if_missing = script_args.missing_model_fallback()
    teacher = resolve_model_path(script_args.teacher_model_name_or_path, if_missing=if_missing)
    student = make_student(script_args, model_args.model_name_or_path, teacher, output_dir)
    check_chat_template(sft_tokenizer(script_args, student, training_args, model_args), training_args)

    rows = load_rows(script_args)
    eval_rows = load_eval_rows(script_args)
    logger.info("%d prompts from %s, %d held out", len(rows), script_args.dataset_name, len(eval_rows))
    report: dict = {
        "teacher": teacher, "mode": script_args.mode,
        "student_spec": script_args.student_spec, "student_prune": script_args.student_prune,
    }  # fmt: skip
    # one sample per problem: a reference point (an untrained student rarely stops, so its samples are long)
    report["student_before"] = evaluate_model(script_args, student, eval_rows, training_args.seed, n=1)
    if script_args.mode in ("offline", "both"):
        report["offline"] = distill_offline(
            script_args, training_args, model_args, teacher, student, list(rows), eval_rows
        )
        student = report["offline"]["student"]
        report["offline"]["student_eval"] = evaluate_model(script_args, student, eval_rows, training_args.seed)
    if script_args.mode in ("on_policy", "both"):
        report["on_policy"] = distill_on_policy(script_args, training_args, model_args, teacher, student, rows)
        student = report["on_policy"]["model"]
        report["on_policy"]["student_eval"] = evaluate_model(script_args, student, eval_rows, training_args.seed)
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


def _finished(output_dir: Path, stages: dict, resume) -> str | None:
    """One line when a resumed distillation has nothing left to do: its report is written and every stage it runs
    reached its end (recipes.common.checkpoints.resume.finished_run, on the stage's own folder); else None."""
    if not (output_dir / "distill_stats.json").is_file():
        return None
    said = [finished_run(args, folder, resume) for folder, args in stages.values()]
    if not all(said):
        return None
    return f"{output_dir} has finished (distill_stats.json is written): " + "; ".join(said)


def make_parser() -> RecipeParser:
    """This recipe's command line: its dataclasses (TRL's imported here, when it is built), its default config and
    the errors that are the user's."""
    from trl import ModelConfig, SFTConfig

    return RecipeParser(
        (DistillScriptArguments, SFTConfig, ModelConfig),
        DEFAULT_CONFIG,
        (ChatTemplateError, TokenizerMismatchError),
        __doc__,
    )


def cli(argv: list[str] | None = None) -> Path:
    """`python recipes/distill.py ...` as a function: parse `argv` (default sys.argv), then train."""
    return make_parser().run(main, argv)


if __name__ == "__main__":
    cli()
