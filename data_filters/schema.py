"""Loading datasets into the row schema of DESIGN.md.

Every row, whatever its source, has `prompt` (chat messages), `answer` (math) or `tests` (code),
`verifier`, `id`, and optionally `solution`, `difficulty`, `pass_rate`, `source`.

Sources: `synthetic:<levels>` (the embedded task), a local JSON/JSONL/Parquet file, a folder written by
`save_to_disk`, or a Hub dataset name. A source whose rows lack `prompt` but have a question field is
turned into the schema with a prompt template (`system_prompt` + `user_template` with `{problem}`).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from pathlib import Path

from data_filters import synthetic

logger = logging.getLogger(__name__)

_FILE_BUILDERS = {".json": "json", ".jsonl": "json", ".parquet": "parquet"}
_EVAL_SPLITS = ("test", "eval", "validation")


class DatasetNotFoundError(FileNotFoundError):
    """The dataset name is neither synthetic, a local file or folder, nor a reachable Hub dataset."""


class SchemaError(ValueError):
    """A row breaks the schema; the message names the source, the row and the field."""


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
    user_template: str = field(
        default="{problem}", metadata={"help": "User message template; '{problem}' is replaced by the question."}
    )


def row_id(text: str, prefix: str = "row") -> str:
    """A stable id from a question's text (used when the source has none)."""
    return f"{prefix}-{hashlib.sha1(text.encode()).hexdigest()[:12]}"


def load_rows(args: DataArguments, split: str | None = None):
    """A `datasets.Dataset` in the row schema. `split` overrides `args.dataset_split`."""
    from datasets import Dataset

    split = split or args.dataset_split
    name = args.dataset_name.strip()
    if synthetic.is_synthetic_name(name):
        rows = synthetic.generate_rows(
            synthetic.parse_levels(name),
            args.dataset_num_rows or 1000,
            seed=args.dataset_seed,
            split="eval" if split in _EVAL_SPLITS else "train",
            system_prompt=args.system_prompt,
            user_template=args.user_template,
        )
        return Dataset.from_list(rows)
    dataset = _load_external(name, args.dataset_config, split)
    if args.dataset_num_rows is not None:
        dataset = dataset.select(range(min(args.dataset_num_rows, len(dataset))))
    return to_schema(dataset, name, args)


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
    try:
        return load_dataset(name, config, split=split)
    except Exception as error:  # the Hub client raises many types; all mean "cannot get it"
        raise DatasetNotFoundError(
            f"dataset {name!r} is not synthetic ('synthetic:<levels>'), not a local file or folder, and could not "
            f"be loaded from the Hub ({type(error).__name__}: {error}). Check the name, your Hub access "
            "(HF_HUB_OFFLINE), or give a local .jsonl/.parquet path."
        ) from error


def to_schema(dataset, source: str, args: DataArguments):
    """Add `prompt`, `answer`, `id`, `verifier` where a source lacks them; error on rows that cannot be mapped."""
    columns = set(dataset.column_names)
    if "prompt" not in columns and "messages" not in columns and args.question_field not in columns:
        raise SchemaError(
            f"{source}: rows have neither 'prompt' nor the question field {args.question_field!r} "
            f"(columns: {sorted(columns)}). Set question_field to the column that holds the question."
        )

    answer_feature = dataset.features.get(args.answer_field)
    if answer_feature is not None and getattr(answer_feature, "dtype", None) not in ("string", "large_string"):
        from datasets import Value

        dataset = dataset.cast_column(args.answer_field, Value("string"))  # answers are text: "7", "\\frac12"

    def convert(row, index):
        out = {}
        if "prompt" not in columns and "messages" not in columns:
            question = row[args.question_field]
            if not isinstance(question, str) or not question.strip():
                raise SchemaError(
                    f"{source}: row {index}: field {args.question_field!r} is {question!r}, expected non-empty text"
                )
            prompt = [{"role": "user", "content": args.user_template.format(problem=question)}]
            if args.system_prompt:
                prompt.insert(0, {"role": "system", "content": args.system_prompt})
            out["prompt"] = prompt
        if args.answer_field in columns and args.answer_field != "answer":
            out["answer"] = row[args.answer_field]
        if "id" not in columns:
            key = row.get(args.question_field) or str(row.get("prompt") or row.get("messages"))
            out["id"] = row_id(str(key), prefix=Path(source).stem or "row")
        if "verifier" not in columns:
            out["verifier"] = "code" if "tests" in columns else "math"
        return out

    return dataset.map(convert, with_indices=True, desc=f"schema: {source}")
