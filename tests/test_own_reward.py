"""Issue 40, item 3: a reward of the user's own, outside the repository, is GRPO's reward and evaluation's
verifier from one config. At db84883 a reward had to be a module inside rewards/, and a row's verifier could
only be math or code: `"verifier": "short_answer"` was refused. The example of docs/rewards.md ("Write your
own reward") runs here as written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from eval import evaluate
from recipes import grpo
from recipes.common.command_line import config
from rewards.registry import UnknownRewardError, get_reward, is_accuracy_reward
from rewards.verdicts import score_completions

REPO = Path(__file__).resolve().parents[1]
COLD_START = REPO / "recipes" / "assets" / "tiny-cold-start"
BEGIN, END = "<!-- own-reward-example: begin -->", "<!-- own-reward-example: end -->"


def doc_blocks() -> dict[str, str]:
    text = (REPO / "docs" / "rewards.md").read_text()
    example = text[text.index(BEGIN) : text.index(END)]
    return {language: body for language, body in re.findall(r"```(\w+)\n(.*?)```", example, flags=re.S)}


@pytest.fixture
def own_reward(tmp_path, monkeypatch):
    (tmp_path / "my_rewards.py").write_text(doc_blocks()["python"])
    monkeypatch.chdir(tmp_path)  # the reference is a path relative to where the command runs
    return "my_rewards.py:short_answer"


def test_the_reference_is_an_accuracy_reward_and_a_verifier(own_reward, tmp_path):
    assert is_accuracy_reward(own_reward)
    reward = get_reward(own_reward, case_sensitive=True)
    assert reward.__name__ == "short_answer"
    assert reward(["I think\nParis", "paris", "x"], answer=["Paris", "Paris", None]) == [1.0, 0.0, None]
    rows = [{"id": str(i), "answer": "Paris", "verifier": own_reward, "prompt": "?"} for i in range(3)]
    scores = score_completions(rows, ["so\nparis", "London", ""], code_options=None, math_options=None)
    assert [score.correct for score in scores] == [True, False, False]
    assert scores[1].reason == "my_rewards.py:short_answer: 0"


@pytest.mark.parametrize(
    ("reference", "expected"),
    [
        ("missing.py:short_answer", "cannot import 'missing.py': ImportError: no such file"),
        ("my_rewards.py:long_answer", "'my_rewards.py' has no function 'long_answer'; its functions: completion_text"),
    ],
)
def test_a_reference_that_cannot_be_had_says_why(reference, expected, own_reward):
    with pytest.raises(UnknownRewardError, match=re.escape(expected)):
        get_reward(reference)


def test_grpo_and_evaluation_from_one_config(own_reward, tmp_path, monkeypatch, capsys):
    words = [{"problem": f"Repeat the word {w}.", "answer": w} for w in ("cat", "dog", "sun", "sky") * 4]
    (tmp_path / "my_words.jsonl").write_text("".join(json.dumps(row) + "\n" for row in words))
    settings = {
        "model_name_or_path": str(COLD_START), "num_generations": 4, "per_device_train_batch_size": 8,
        "max_completion_length": 16, "max_steps": 2, "warmup_steps": 0, "use_cpu": True, "bf16": False,
        "logging_steps": 1, "save_strategy": "no", "report_to": "none", "disable_tqdm": True,
        "output_dir": "runs/grpo",
    }  # fmt: skip
    yaml_text = doc_blocks()["yaml"] + "".join(f"{key}: {json.dumps(value)}\n" for key, value in settings.items())
    (tmp_path / "my_grpo.yaml").write_text(yaml_text)
    monkeypatch.setattr(config, "setup_logging", lambda: None)
    grpo.cli(["--config", "my_grpo.yaml", "--dataset_name", "my_words.jsonl"])
    logged = [json.loads(line) for line in (tmp_path / "runs/grpo/metrics.jsonl").read_text().splitlines()]
    assert any("rewards/short_answer/mean" in record for record in logged), logged[0]

    # `python -m eval.evaluate ...` in the same folder, through its main() in this process (a process of its own
    # would add only the imports): the reference is found from the working directory as the command line finds it
    argv = ["--model", "runs/grpo", "--dataset", "my_words.jsonl", "--verifier", own_reward, "--n", "2"]
    argv += ["--max-new-tokens", "8", "--output-dir", "runs/eval"]
    capsys.readouterr()
    evaluate.main(argv)  # a mistake would end it with SystemExit(2), a bug with its exception
    assert "pass@1" in capsys.readouterr().out
