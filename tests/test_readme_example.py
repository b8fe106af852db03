"""The README's "Your own data, end to end" block, run as it is written: a user's JSONL with its own column
names through SFT, DAPO, two evaluations and a comparison, on a real model's tokenizer and chat template.

Three things stand in for the user's machine: `make real-model` (the real weights come from a package index
that the suite does not use) copies a 2-layer stand-in with SmolLM2's tokenizer instead; the recipes are given
`--max_steps 2` and GRPO and the evaluations shorter rollouts (the configs' own budgets are minutes of training,
and a random stand-in never stops before its token limit); `.venv/bin/activate` puts this test's Python first
on PATH. Everything else is the README's text, run by bash.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

from tests.conftest import REPO

BEGIN, END = "<!-- own-data-example: begin -->", "<!-- own-data-example: end -->"


def readme_example() -> str:
    text = (REPO / "README.md").read_text()
    block = text[text.index(BEGIN) + len(BEGIN) : text.index(END)]
    return re.search(r"```bash\n(.*?)```", block, re.DOTALL).group(1)


def write_problems(path, count: int, offset: int) -> None:
    with open(path, "w") as handle:
        for index in range(offset, offset + count):
            a, b = 2 + index % 7, 3 + index % 5
            handle.write(
                json.dumps({
                    "question": f"Ana has {a} apples and buys {b} more. How many apples does she have?",
                    "final_answer": str(a + b),
                    "worked_solution": f"{a} + {b} = {a + b}.\n\\boxed{{{a + b}}}",
                })
                + "\n"
            )  # fmt: skip


def test_the_readme_own_data_example_runs_as_written(smol_standin_dir, tmp_path):
    script = readme_example()
    assert "recipes/sft.py" in script and "recipes/grpo.py" in script and "eval.evaluate" in script
    (tmp_path / "recipes").symlink_to(REPO / "recipes")
    write_problems(tmp_path / "my_train.jsonl", 16, 0)
    write_problems(tmp_path / "my_test.jsonl", 4, 100)
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "activate").write_text(f'export PATH="{os.path.dirname(sys.executable)}:$PATH"\n')
    standin = tmp_path / "standin"
    shutil.copytree(smol_standin_dir, standin)
    shims = f"""
make() {{ [ "$1" = real-model ] && mkdir -p artifacts/models && cp -r {standin} artifacts/models/smollm2-135m-instruct; }}
python() {{
  case "$1 $2" in
    "recipes/grpo.py "*) command python "$@" $SHORT --per_device_train_batch_size 8 --max_completion_length 32 ;;
    recipes/*.py*) command python "$@" $SHORT ;;
    "-m eval.evaluate") command python "$@" --max-new-tokens 32 ;;
    *) command python "$@" ;;
  esac
}}
SHORT="--max_steps 2 --save_strategy no --logging_steps 1"
set -euo pipefail
"""
    result = subprocess.run(
        ["bash", "-c", shims + script], cwd=tmp_path, capture_output=True, text=True, timeout=900,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    for run in ("sft", "dapo"):
        card = json.loads((tmp_path / "runs" / run / "run_card.json").read_text())
        assert card["final_step"] == 2 and card["datasets"]["train"]["rows"] == 16
    for run in ("eval-sft", "eval-dapo"):
        summary = json.loads((tmp_path / "runs" / run / "my_test" / "summary.json").read_text())
        assert summary["samples"] == 4 * 4  # 4 held-out problems x --n 4
        prompt = json.loads((tmp_path / "runs" / run / "my_test" / "samples.jsonl").read_text().splitlines()[0])
        assert "boxed" in json.dumps(prompt)  # the default template asked for a box
    assert (tmp_path / "runs" / "compare" / "compare.md").is_file()


def test_the_example_data_script_writes_distinct_verified_problems(tmp_path):
    """scripts/make_example_data.py: the files the README's costs were measured on (seed 57): every question
    distinct, train and test disjoint, each worked solution verified right by the math verifier against its answer."""
    from rewards.math import verify

    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "make_example_data.py"), "--train", "30", "--test", "10",
         "--out", str(tmp_path)], capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert "30 problems" in done.stdout and "10 problems" in done.stdout
    train, test = ([json.loads(line) for line in (tmp_path / name).read_text().splitlines()]
                   for name in ("my_train.jsonl", "my_test.jsonl"))  # fmt: skip
    questions = [row["question"] for row in train + test]
    assert len(train) == 30 and len(test) == 10 and len(set(questions)) == 40
    for row in train + test:
        start, more, given = map(int, re.findall(r"\d+", row["question"]))
        assert int(row["final_answer"]) == start + more - given
        assert verify(row["final_answer"], row["worked_solution"]).correct is True
