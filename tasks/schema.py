"""Loading datasets into the row schema, which this docstring defines.

Every row, whatever its source, has `prompt` (chat messages), `answer` (math) or `tests` (code),
`verifier`, `id`, and optionally `solution`, `difficulty`, `pass_rate`, `source`.

Sources: `synthetic:<levels>` (the embedded task), a local JSON/JSONL/Parquet file, a folder written by
`save_to_disk`, or a Hub dataset name. A source whose rows lack `prompt` but have a question field is
turned into the schema with a prompt template (`system_prompt` + `user_template` with `{problem}`);
other column names are mapped with `field_map` (schema field -> source column).

Every row is validated for the verifier that will score it: a math row needs a gold answer, a code row
tests that the code verifier can read, every row a question or a prompt. Bad rows are reported all at
once, each named by source, row and field, with the way to fix it (`on_error: raise`), or skipped and
counted by reason (`on_error: drop`), because a filter pipeline over 100k rows should not stop at the
first of two null answers, and must not silently carry them into training either.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from basics.option_values import is_choice
from rewards.verdicts import DEFAULT_VERIFIER, REQUIRE_NUMBER, verifier_problem
from tasks import synthetic
from tasks.data_arguments import MAPPABLE_FIELDS, ON_ERROR, DataArguments  # noqa: F401 (re-exported: the recipes' import)
from tasks.hub import hub_problem
from tasks.rows import MATH_USER_TEMPLATE, PLAIN_USER_TEMPLATE, build_prompt, row_id

logger = logging.getLogger(__name__)

_FILE_BUILDERS = {".json": "json", ".jsonl": "json", ".parquet": "parquet"}
_EVAL_SPLITS = ("test", "eval", "validation")
_PROBLEM_COLUMN = "__schema_problem__"
_ERRORS_SHOWN = 20


class DatasetNotFoundError(FileNotFoundError):
    """The dataset name is neither synthetic, a local file or folder, nor a reachable Hub dataset."""


class SchemaError(ValueError):
    """A row breaks the schema; the message names the source, the row and the field."""


@dataclass
class SchemaReport:
    """What loading did to the rows: how many came in, how many were kept, and each dropped row with its reason."""

    source: str
    rows_in: int = 0
    rows_kept: int = 0
    problems: list[tuple[int, str, str]] = field(default_factory=list)  # (row index in the source, field, message)

    @property
    def rows_dropped(self) -> int:
        return self.rows_in - self.rows_kept

    def reasons(self) -> dict[str, int]:
        """Dropped rows counted by reason ("answer is None", ...), most frequent first."""
        return dict(Counter(f"{name} {message.split(';')[0]}" for _, name, message in self.problems).most_common())

    def to_dict(self) -> dict:
        return {
            "source": self.source,
            "rows_in": self.rows_in,
            "rows_kept": self.rows_kept,
            "rows_dropped": self.rows_dropped,
            "reasons": self.reasons(),
            "dropped_rows": [
                {"row": index, "field": name, "problem": message} for index, name, message in self.problems
            ],
        }


def load_rows(args: DataArguments, split: str | None = None):
    """A `datasets.Dataset` in the row schema. `split` overrides `args.dataset_split`."""
    return load_rows_with_report(args, split)[0]


def load_rows_with_report(args: DataArguments, split: str | None = None):
    """`(dataset, SchemaReport)`: the rows in the schema and what validation dropped (in `drop` mode)."""
    from datasets import Dataset

    split = split or args.dataset_split
    name = args.dataset_name.strip()
    if synthetic.is_synthetic_name(name):
        rows = synthetic.generate_named(
            name,
            args.dataset_num_rows or 1000,
            seed=args.dataset_seed,
            split="eval" if split in _EVAL_SPLITS else "train",
            system_prompt=args.system_prompt,
            user_template=args.user_template or PLAIN_USER_TEMPLATE,  # the generated tasks: the question alone
            **({} if args.require_number is None else {"require_number": args.require_number}),
        )
        return Dataset.from_list(rows), SchemaReport(name, len(rows), len(rows))
    misspelled = None if Path(name).expanduser().exists() else synthetic.misspelled_name_message(name)
    if misspelled:
        raise DatasetNotFoundError(misspelled)
    dataset = _load_external(name, args.dataset_config, split)
    if args.dataset_num_rows is not None:
        dataset = dataset.select(range(min(args.dataset_num_rows, len(dataset))))
    return to_schema_with_report(dataset, name, args)


def _load_external(name: str, config: str | None, split: str):
    from datasets import DatasetDict, load_dataset, load_from_disk

    path = Path(name).expanduser()
    if path.is_file():
        builder = _FILE_BUILDERS.get(path.suffix.lower())
        if builder is None:
            raise DatasetNotFoundError(
                f"{name!r}: unsupported file type {path.suffix!r}; use .json, .jsonl or .parquet, "
                "or a folder written by Dataset.save_to_disk"
            )
        if builder == "json":
            _check_json_file(path, name)
        return load_dataset(builder, data_files=str(path), split="train")
    if path.is_dir():
        loaded = load_from_disk(str(path))
        if isinstance(loaded, DatasetDict):
            if split not in loaded:
                raise DatasetNotFoundError(f"{name!r} has splits {sorted(loaded)}, not {split!r}; set dataset_split")
            return loaded[split]
        return loaded
    if path.suffix.lower() in _FILE_BUILDERS or name.startswith((".", "/", "~")):
        raise DatasetNotFoundError(f"dataset file {name!r} does not exist")
    problem = hub_problem(name, "dataset")  # in seconds, not after the Hub client's retries
    if problem:
        raise DatasetNotFoundError(problem)
    try:
        return load_dataset(name, config, split=split)
    except Exception as error:  # the Hub client raises many types; all mean "cannot get it"
        raise DatasetNotFoundError(
            f"dataset {name!r} is not synthetic ('synthetic:<levels>'), not a local file or folder, and could not "
            f"be loaded from the Hub ({type(error).__name__}: {error}). Check the name, your Hub access "
            "(HF_HUB_OFFLINE), or give a local .jsonl/.parquet path."
        ) from error


def _check_json_file(path: Path, name: str) -> None:
    """An empty file or a line that is not JSON, named with its line number before `datasets` reads it.

    `datasets`' JSON builder reports the first as a bare StopIteration and the second as a long traceback
    with the line number buried in it.
    """
    with path.open(encoding="utf-8", errors="replace") as handle:
        first = handle.read(1 << 16)
        if not first.strip():
            raise SchemaError(f"{name}: the file is empty (no rows); give a file with one JSON object per line")
        if first.lstrip().startswith("["):  # one JSON array, not JSON Lines
            handle.seek(0)
            try:
                json.load(handle)
            except ValueError as error:
                raise SchemaError(f"{name}: not valid JSON ({error}); fix the file or write it as JSON Lines") from None
            return
        handle.seek(0)
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as error:
                raise SchemaError(
                    f"{name}: line {number} is not JSON ({error}): {line.strip()[:60]!r}; fix or remove that line"
                ) from None
            if not isinstance(row, dict):
                raise SchemaError(f"{name}: line {number} is {type(row).__name__}, not a JSON object of columns")


def to_schema(dataset, source: str, args: DataArguments):
    """Add `prompt`, `answer`, `id`, `verifier` where a source lacks them; error on rows that cannot be mapped."""
    return to_schema_with_report(dataset, source, args)[0]


def _check_columns(
    columns: set[str], source: str, mapping: dict[str, str], args: DataArguments, needs_answer: bool
) -> None:
    """Source-level mistakes (a column that is not there at all) get one error, not one per row."""
    if "prompt" not in columns and "messages" not in columns and mapping["problem"] not in columns:
        raise SchemaError(
            f"{source}: rows have neither 'prompt' nor the question field {mapping['problem']!r} "
            f"(columns: {sorted(columns)}). Set question_field to the column that holds the question."
        )
    for key, column in (args.field_map or {}).items():
        if column not in columns:
            raise SchemaError(
                f"{source}: field_map maps {key!r} to the column {column!r}, which the source does not have "
                f"(columns: {sorted(columns)}). Fix the field map."
            )
    may_be_code = "tests" in columns or "tests" in mapping or "verifier" in columns or args.verifier == "code"
    if needs_answer and not may_be_code and mapping["answer"] not in columns:
        raise SchemaError(
            f"{source}: rows have no answer column {mapping['answer']!r} (columns: {sorted(columns)}), and math rows "
            "need a gold answer. Set answer_field to the column that holds it (a worked solution ending in \\boxed{} "
            "works too), or map 'tests' for code rows."
        )


def _row_problem(out: dict, row: dict, verifier: str, answer_column: str) -> tuple[str, str] | None:
    """(field, what is wrong and how to fix it) for a converted row that breaks the schema; None when it is fine."""
    problem = verifier_problem(verifier)
    if problem:
        return "verifier", f"{problem}; set the verifier column or option"
    if verifier == "math":
        answer = out.get("answer", row.get("answer"))
        if answer is None or not str(answer).strip():
            return answer_column, f"is {answer!r}; a math row needs a gold answer"
        choice = out.get(REQUIRE_NUMBER, row.get(REQUIRE_NUMBER))
        if not is_choice(choice):
            return REQUIRE_NUMBER, f"is {choice!r}; it takes true or false (empty: false)"
        return None
    if verifier != "code":  # an accuracy reward of the user's: it says itself which rows it cannot score
        return None
    tests = out.get("tests", row.get("tests"))
    if tests is None or (isinstance(tests, str) and not tests.strip()):
        return "tests", f"is {tests!r}; a code row needs tests (stdin/stdout pairs or asserts)"
    from rewards.code.tests_format import parse_tests

    try:
        parse_tests(tests)
    except ValueError as error:
        return "tests", (
            f"cannot be read by the code verifier ({error}); it takes {{'inputs': [...], 'outputs': [...]}} "
            "or {'test': ..., 'entry_point': ...}"
        )
    return None


def to_schema_with_report(dataset, source: str, args: DataArguments):
    """`(dataset, SchemaReport)`. Rows that break the schema raise one SchemaError naming them all, or are
    dropped and counted when `args.on_error == "drop"`."""
    mapping = args.resolved_field_map()
    columns = set(dataset.column_names)
    conversations_only = "prompt" not in columns and mapping["problem"] not in columns  # SFT `messages` rows
    _check_columns(columns, source, mapping, args, needs_answer=not conversations_only)
    answer_column = mapping["answer"]
    answer_feature = dataset.features.get(answer_column)
    if answer_feature is not None and getattr(answer_feature, "dtype", None) not in ("string", "large_string"):
        from datasets import Value

        dataset = dataset.cast_column(answer_column, Value("string"))  # answers are text: "7", "\\frac12"
    prefix = Path(source).stem or "row"
    copied = {key: column for key, column in mapping.items() if key not in ("problem", "prompt") and column in columns}

    def row_template(row) -> str:
        """The default template of one row: code rows (tests, or the code verifier) are asked nothing more."""
        tests_column = copied.get("tests", "tests")
        code = (
            row.get(copied.get("verifier", "verifier")) == "code"
            or args.verifier == "code"
            or bool(row.get(tests_column))
        )
        return PLAIN_USER_TEMPLATE if code else MATH_USER_TEMPLATE

    def convert(row, index):
        out = {key: row[column] for key, column in copied.items() if key != column}
        problem = None
        if "prompt" in mapping and mapping["prompt"] in columns:
            out["prompt"] = row[mapping["prompt"]]
        elif "prompt" not in columns and "messages" not in columns:
            question = row[mapping["problem"]]
            if isinstance(question, str) and question.strip():
                out["prompt"] = build_prompt(question, args.system_prompt, args.user_template or row_template(row))
            else:
                out["prompt"] = [{"role": "user", "content": ""}]  # a placeholder of the same type; the row is reported
                problem = mapping["problem"], f"is {question!r}, expected non-empty text (the question)"
        # the source's own id (an `id` column, or the column field_map names) wins over a hash of the question
        source_id = row.get(copied["id"]) if "id" in copied else row.get("id") if "id" in columns else None
        if source_id is None or not str(source_id).strip():
            key = row.get(mapping["problem"]) or str(row.get("prompt") or row.get("messages"))
            out["id"] = row_id(str(key), prefix=prefix)
        else:
            out["id"] = str(source_id)
        verifier = out.get("verifier", row.get("verifier")) or args.verifier
        if not verifier:
            verifier = "code" if ("tests" in copied or "tests" in columns) else DEFAULT_VERIFIER
        out["verifier"] = verifier
        if "source" not in columns and "source" not in copied:
            out["source"] = prefix
        if args.require_number is not None:
            out[REQUIRE_NUMBER] = args.require_number  # the config's choice travels with every row
        if problem is None and not conversations_only:
            problem = _row_problem(out, row, verifier, answer_column)
        # "" for a good row: a column that starts with 1000 Nones gets Arrow's null type and breaks later batches
        out[_PROBLEM_COLUMN] = "" if problem is None else "\x1f".join(problem)
        return out

    converted = dataset.map(convert, with_indices=True, desc=f"schema: {source}")
    problems = [
        (index, *problem.split("\x1f", 1)) for index, problem in enumerate(converted[_PROBLEM_COLUMN]) if problem
    ]
    converted = converted.remove_columns(_PROBLEM_COLUMN)
    report = SchemaReport(source, rows_in=len(converted), rows_kept=len(converted) - len(problems), problems=problems)
    if problems and args.on_error == "raise":
        ids = converted.select([index for index, _, _ in problems[:_ERRORS_SHOWN]])["id"]
        listed = "\n".join(
            f"  row {index}: field {name!r} {message} (id {row_key!r})"
            for (index, name, message), row_key in zip(problems, ids, strict=False)
        )
        more = f"\n  ... and {len(problems) - _ERRORS_SHOWN} more" if len(problems) > _ERRORS_SHOWN else ""
        raise SchemaError(
            f"{source}: {len(problems)} of {len(converted)} rows break the schema (rows counted from 0):\n{listed}{more}\n"
            "Fix these rows in the source, map the columns that hold the question, answer or tests "
            "(question_field, answer_field, field_map), or set on_error: drop to skip such rows and get a count by reason."
        )
    if problems:
        bad = {index for index, _, _ in problems}
        converted = converted.select([index for index in range(len(converted)) if index not in bad])
        logger.warning(
            "%s: dropped %d of %d rows that break the schema: %s", source, len(bad), report.rows_in, report.reasons()
        )
    duplicates = len(converted) - len(set(converted["id"]))
    if duplicates:
        logger.warning(
            "%s: %d rows repeat the id of an earlier row (duplicate questions? see data_filters.dedup)",
            source,
            duplicates,
        )
    return converted, report
