"""Which rows a recipe reads and how their prompts are written: the options every recipe and evaluation shares.

Split from tasks/schema.py (which loads and validates the rows these options name), so that each stays one
concept; `from tasks.schema import DataArguments` keeps working.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from basics.option_values import is_choice, is_yes
from rewards.verdicts import REQUIRE_NUMBER, verifier_problem

ON_ERROR = ("raise", "drop")
# Schema fields a field map may name, besides the question ('problem', alias 'question') and 'answer'.
MAPPABLE_FIELDS = (
    "problem", "answer", "id", "tests", "solution", "difficulty", "verifier", "source", "prompt", REQUIRE_NUMBER,
)  # fmt: skip
_REQUIRE_NUMBER_HELP = (
    "Where a math row's gold is a number, accept only a number, not an expression that evaluates to it (\\boxed{7+5} "
    "is not 12). Unset: each row's 'require_number' column (arithmetic: and synthetic: set it); true/false: every row."
)


@dataclass
class DataArguments:
    """Where the rows come from and how prompts are written. Shared by every recipe."""

    dataset_name: str = field(
        default="synthetic:1-3",
        metadata={
            "help": "'synthetic:<levels>' (the embedded task, e.g. 'synthetic:1-3'), a local .json/.jsonl/.parquet "
            "file, a folder written by save_to_disk, or a Hub dataset name."
        },
    )
    dataset_config: str | None = field(default=None, metadata={"help": "Hub dataset configuration name."})
    dataset_split: str = field(default="train", metadata={"help": "Split to load."})
    dataset_num_rows: int | None = field(
        default=None,
        metadata={"help": "Synthetic: rows per level (default 1000). Other sources: keep only the first N rows."},
    )
    dataset_seed: int = field(default=0, metadata={"help": "Seed of the synthetic generator."})
    question_field: str = field(
        default="problem", metadata={"help": "Column holding the question when rows have no 'prompt' column."}
    )
    answer_field: str = field(default="answer", metadata={"help": "Column holding the gold answer."})
    system_prompt: str | None = field(default=None, metadata={"help": "System message put before every question."})
    user_template: str | None = field(
        default=None,
        metadata={
            "help": "User message template; '{problem}' is replaced by the question. Default: math rows of a file "
            "or Hub set add 'Please reason step by step, and put your final answer within \\boxed{}.' (the "
            "verifier reads boxes), as eval.evaluate does; code rows and the generated tasks keep the question alone."
        },
    )
    field_map: dict | str | None = field(
        default=None,
        metadata={
            "help": "Schema field -> source column, for sources with other names: e.g. {'answer': 'final_answer', "
            "'id': 'uid', 'tests': 'test_cases', 'solution': 'reasoning', 'difficulty': 'level'} (a JSON string on "
            "the command line). 'problem' (or 'question') and 'answer' here override question_field/answer_field."
        },
    )
    verifier: str | None = field(
        default=None,
        metadata={
            "help": "Verifier of rows without a 'verifier' column: 'math', 'code' (default: code if tests), or an "
            "accuracy reward, your own included ('path/to/file.py:name')."
        },
    )
    require_number: bool | None = field(default=None, metadata={"help": _REQUIRE_NUMBER_HELP})
    on_error: str = field(
        default="raise",
        metadata={
            "help": "'raise': rows that break the schema stop loading with an error naming each; 'drop': such rows "
            "are skipped, and how many and why is logged (and returned by load_rows_with_report)."
        },
    )

    def __post_init__(self) -> None:
        if self.on_error not in ON_ERROR:
            raise ValueError(f"on_error must be one of {ON_ERROR}, got {self.on_error!r}")
        if self.require_number is not None:
            if not is_choice(self.require_number):
                raise ValueError(f"require_number must be true, false or unset, got {self.require_number!r}")
            self.require_number = is_yes(self.require_number)
        if self.verifier is not None and (problem := verifier_problem(self.verifier)):
            raise ValueError(f"verifier {problem}")
        if self.user_template is not None and "{problem}" not in self.user_template:
            raise ValueError(f"user_template must contain '{{problem}}', got {self.user_template!r}")
        if isinstance(self.field_map, str):
            try:
                self.field_map = json.loads(self.field_map) if self.field_map.strip() else None
            except ValueError as error:
                raise ValueError(f"field_map is not valid JSON ({error}): {self.field_map!r}") from error
        if self.field_map is not None and not isinstance(self.field_map, dict):
            raise ValueError(f"field_map must map schema fields to column names, got {self.field_map!r}")
        for key, column in (self.field_map or {}).items():
            if key not in (*MAPPABLE_FIELDS, "question") or not isinstance(column, str):
                raise ValueError(
                    f"field_map entry {key!r}: {column!r}: keys must be schema fields ({', '.join(MAPPABLE_FIELDS)}) "
                    "and values column names"
                )

    def resolved_field_map(self) -> dict[str, str]:
        """Schema field -> source column, with question_field/answer_field as the defaults for problem/answer."""
        mapping = {"problem": self.question_field, "answer": self.answer_field}
        for key, column in (self.field_map or {}).items():
            mapping["problem" if key == "question" else key] = column
        return mapping
