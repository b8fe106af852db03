"""Evaluation sets by name, returned in the row schema (tasks/schema.py).

    aime24, aime25, amc23, math500, gsm8k     Hub datasets, with their field maps
    synthetic:<levels>                       the embedded task's held-out split (e.g. synthetic:5, synthetic:1-8)
    arithmetic:<levels>, arithmetic-hard:<levels>
                                             the arithmetic task's held-out split, and its harder split's
    humaneval, apps:<file>, codecontests:<file>, livecodebench:<file>
                                             code sets, scored by the code verifier (tasks/code_sets.py)
    any local .json / .jsonl / .parquet file or save_to_disk folder

Loading goes through tasks.schema (the loaders every stage uses). This module sits in the task layer,
under eval, data_filters and recipes, so it imports only tasks and rewards (tests/test_layering.py checks).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from tasks.code_sets import STYLES, is_code_set_name, load_code_set
from tasks.rows import MATH_USER_TEMPLATE, PLAIN_USER_TEMPLATE

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EvalSet:
    """Where a named evaluation set lives on the Hub and how its columns map to the row schema."""

    hub_id: str
    split: str
    question_field: str
    answer_field: str
    config: str | None = None
    difficulty_field: str | None = None
    answer_format: str = "plain"  # "gsm8k": the answer column ends with "#### <number>"
    description: str = ""


REGISTRY: dict[str, EvalSet] = {
    "aime24": EvalSet("HuggingFaceH4/aime_2024", "train", "problem", "answer", description="AIME 2024 I and II, 30"),
    "aime25": EvalSet("math-ai/aime25", "test", "problem", "answer", description="AIME 2025 I and II, 30"),
    "amc23": EvalSet("math-ai/amc23", "test", "question", "answer", description="AMC 2023, 40"),
    "math500": EvalSet(
        "HuggingFaceH4/MATH-500", "test", "problem", "answer", difficulty_field="level", description="MATH-500, 500"
    ),
    "gsm8k": EvalSet(
        "openai/gsm8k", "test", "question", "answer", config="main", answer_format="gsm8k", description="GSM8K, 1319"
    ),
}
DEFAULT_SYNTHETIC_PROBLEMS = 100  # per level
SET_DEFAULT = None  # user_template=SET_DEFAULT: each set's own evaluation prompt (default_user_template)
_GSM8K_ANSWER = re.compile(r"####\s*(.+?)\s*$", re.DOTALL)


def available_eval_datasets() -> list[str]:
    return [
        *sorted(REGISTRY),
        "synthetic:<levels>",
        "arithmetic:<levels>",
        "arithmetic-hard:<levels>",
        "humaneval",
        *(f"{style}:<file>" for style in STYLES),
        "<path to .json/.jsonl/.parquet or a save_to_disk folder>",
    ]


def default_user_template(name: str) -> str:
    """The user template an evaluation uses when none is given.

    Math sets ask for a boxed answer (MATH_USER_TEMPLATE), since the verifier reads boxes. Code sets keep the
    question alone (their prompts say what to write), and so do the generated tasks (`synthetic:`,
    `arithmetic:`): their questions carry the format the demo's models were trained on.
    """
    from tasks.synthetic import is_synthetic_name

    name = name.strip()
    return PLAIN_USER_TEMPLATE if is_code_set_name(name) or is_synthetic_name(name) else MATH_USER_TEMPLATE


def gsm8k_final_answer(text: str | None) -> str | None:
    """The number after GSM8K's `####` marker, thousands separators removed; None when there is none."""
    if not text:
        return None
    match = _GSM8K_ANSWER.search(text)
    return match.group(1).replace(",", "").strip() if match else None


def load_eval_dataset(
    name: str,
    num_rows: int | None = None,
    system_prompt: str | None = None,
    user_template: str | None = PLAIN_USER_TEMPLATE,
    seed: int = 0,
    question_field: str = "problem",
    answer_field: str = "answer",
    field_map: dict | None = None,
    verifier: str | None = None,
):
    """The rows of an evaluation set (a `datasets.Dataset` in the row schema).

    `num_rows` keeps the first rows of a real set, or sets the problems per level of `synthetic:`.
    `question_field`, `answer_field` and `field_map` name the columns of a set that is not in the registry
    (a local file or another Hub set), as DataArguments does for the recipes; `verifier` scores the rows that
    name none (math, code, or an accuracy reward: a user's own as 'path/to/file.py:name').
    `user_template=None` (SET_DEFAULT) takes each row's default, the one the recipes write too (tasks/schema.py:
    math rows ask for a boxed answer, code rows and the generated tasks keep the question alone; for a whole set,
    `default_user_template`); the plain `{problem}` default keeps the bare question (data_filters compare
    questions without any template).
    """
    from tasks.schema import DataArguments, DatasetNotFoundError, load_rows
    from tasks.synthetic import is_synthetic_name

    name = name.strip()
    if is_code_set_name(name):
        return load_code_set(name, num_rows, system_prompt, user_template or PLAIN_USER_TEMPLATE)
    prompts = {"system_prompt": system_prompt, "user_template": user_template}  # the same for every kind of set
    if is_synthetic_name(name):
        args = DataArguments(
            dataset_name=name, dataset_num_rows=num_rows or DEFAULT_SYNTHETIC_PROBLEMS, dataset_seed=seed, **prompts
        )
        return load_rows(args, split="eval")
    spec = REGISTRY.get(name)
    if spec is None:
        columns = {"question_field": question_field, "answer_field": answer_field, "field_map": field_map}
        args = DataArguments(dataset_name=name, dataset_num_rows=num_rows, verifier=verifier, **columns, **prompts)
        try:
            return load_rows(args, split="test")
        except DatasetNotFoundError as error:
            raise DatasetNotFoundError(
                f"unknown evaluation set {name!r}: not a registry name ({', '.join(sorted(REGISTRY))}), not "
                f"'synthetic:<levels>', and not a readable local path. ({error})"
            ) from error
    columns = {"question_field": spec.question_field, "answer_field": spec.answer_field}
    source = {"dataset_name": spec.hub_id, "dataset_config": spec.config, "dataset_split": spec.split}
    args = DataArguments(**source, dataset_num_rows=num_rows, verifier=verifier, **columns, **prompts)
    rows = load_rows(args)
    if spec.answer_format == "gsm8k":
        rows = rows.map(lambda row: {"answer": gsm8k_final_answer(row["answer"])}, desc="gsm8k answers")
    if spec.difficulty_field and spec.difficulty_field in rows.column_names:
        rows = rows.map(lambda row: {"difficulty": row[spec.difficulty_field]}, desc="difficulty")
    return rows.map(lambda row: {"source": name}, desc="source")
