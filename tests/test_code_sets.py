"""Local files of the stdin/stdout code sets (APPS, CodeContests, LiveCodeBench) by name, in the row schema.

Each file here is written in the source's own layout; the rows must come out with stdin/stdout tests that
the code verifier scores: a right program 1, a wrong one 0. Rows that cannot be judged that way are left out.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rewards import get_reward
from tasks.datasets import available_eval_datasets, load_eval_dataset

DOUBLE = "```python\nprint(int(input()) * 2)\n```"
TRIPLE = "```python\nprint(int(input()) * 3)\n```"


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


@pytest.fixture
def apps_file(tmp_path):
    return write_jsonl(
        tmp_path / "apps.jsonl",
        [
            {
                "problem_id": 7,
                "question": "Print twice the number.",
                "input_output": json.dumps({"inputs": ["2\n", "5\n"], "outputs": ["4\n", "10\n"]}),
                "difficulty": "introductory",
            },
            {"problem_id": 8, "question": "call based", "input_output": json.dumps({"fn_name": "f", "inputs": [[1]]})},
        ],
    )


@pytest.fixture
def codecontests_file(tmp_path):
    rows = [
        {
            "name": "double",
            "description": "Print twice the number.",
            "public_tests": {"input": ["3\n"], "output": ["6\n"]},
            "private_tests": {"input": ["10\n"], "output": ["20\n"]},
            "difficulty": 7,
        }
    ]
    return write_jsonl(tmp_path / "cc.jsonl", rows)


@pytest.fixture
def livecodebench_file(tmp_path):
    cases = [
        {"input": "4\n", "output": "8\n", "testtype": "stdin"},
        {"input": "f(1)", "output": "2", "testtype": "functional"},
    ]
    rows = [
        {
            "question_id": "abc001_a",
            "question_content": "Print twice the number.",
            "public_test_cases": json.dumps(cases),
            "private_test_cases": "eJzLSM3JyVcozy/KSQEAGgQEXQ==",  # a compressed blob: never unpickled, left out
            "difficulty": "easy",
        },
        {"question_id": "f_only", "question_content": "x", "public_test_cases": json.dumps(cases[1:])},
    ]
    return write_jsonl(tmp_path / "lcb.jsonl", rows)


@pytest.mark.parametrize(
    ("style", "fixture", "ids", "inputs"),
    [
        ("apps", "apps_file", ["apps-7"], ["2\n", "5\n"]),
        ("codecontests", "codecontests_file", ["codecontests-double"], ["3\n", "10\n"]),
        ("livecodebench", "livecodebench_file", ["livecodebench-abc001_a"], ["4\n"]),
    ],
)
def test_local_code_sets_load_by_name_and_score(style, fixture, ids, inputs, request):
    path = request.getfixturevalue(fixture)
    rows = load_eval_dataset(f"{style}:{path}")
    assert rows["id"] == ids  # the row that cannot be judged by stdin/stdout is left out
    assert set(rows["verifier"]) == {"code"} and rows[0]["source"] == style
    assert "twice" in rows[0]["prompt"][-1]["content"]
    assert json.loads(rows[0]["tests"])["inputs"] == inputs
    reward = get_reward("code_pass_rate", timeout_s=5.0)
    assert reward([DOUBLE, TRIPLE], tests=[rows[0]["tests"]] * 2) == [1.0, 0.0]


def test_code_sets_are_listed():
    names = available_eval_datasets()
    assert "humaneval" in names and "apps:<file>" in names and "livecodebench:<file>" in names


def test_a_missing_file_says_so(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_eval_dataset(f"apps:{tmp_path / 'missing.jsonl'}")


EASY = Path(__file__).parent / "data" / "code_easy.jsonl"


def test_the_easy_function_set_loads_and_its_solutions_pass():
    rows = load_eval_dataset(str(EASY))
    assert len(rows) == 22 and set(rows["verifier"]) == {"code"}
    reward = get_reward("code_binary", timeout_s=5.0)
    assert reward(rows["solution"], tests=rows["tests"]) == [1.0] * len(rows)
    stubs = [
        f"```python\ndef {json.loads(tests)['entry_point']}(*args):\n    return None\n```" for tests in rows["tests"]
    ]
    assert reward(stubs, tests=rows["tests"]) == [0.0] * len(rows)


def test_the_code_grpo_config_reads_codecontests_rows(tmp_path):
    # The config's data settings, applied to a row in CodeContests' layout (its tests are a struct column).
    import yaml

    from tasks.schema import DataArguments, load_rows

    config = yaml.safe_load(
        (Path(__file__).parents[1] / "recipes/configs/qwen2.5-coder-1.5b/grpo_code.yaml").read_text()
    )
    row = {
        "name": "double",
        "description": "Print twice the number.",
        "private_tests": {"input": ["3\n", "4\n"], "output": ["6\n", "8\n"]},
        "difficulty": 7,
    }
    empty = {**row, "name": "empty", "private_tests": {"input": [], "output": []}}
    path = write_jsonl(tmp_path / "code_contests.jsonl", [row, empty])
    fields = ("field_map", "verifier", "on_error", "system_prompt", "dataset_split")
    rows = load_rows(DataArguments(dataset_name=path, **{key: config[key] for key in fields}))
    assert rows["id"] == ["double"]  # the row without cases is dropped
    reward = get_reward(
        config["rewards"][0]["name"], **{k: v for k, v in config["rewards"][0].items() if k not in ("name", "weight")}
    )
    assert reward([DOUBLE, TRIPLE], tests=[rows[0]["tests"]] * 2) == [1.0, 0.0]
