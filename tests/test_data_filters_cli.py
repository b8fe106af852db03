"""`python -m data_filters --config FILE.yaml`: the example configs are valid, a static pipeline on the real
MATH training set and a sampling pipeline with the tiny guessing model write their rows and a report whose
numbers add up, and config mistakes are named."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml
from datasets import load_from_disk

from data_filters.__main__ import main
from data_filters.curriculum import difficulty_bucket
from data_filters.pipeline import ConfigError, check_config, run_pipeline
from tests.conftest import REPO, build_once
from tests.support.guessing_model import build_guessing_model

CONFIG_DIR = REPO / "recipes" / "configs" / "data_filters"  # the example configs


@pytest.mark.parametrize("path", sorted(CONFIG_DIR.glob("*.yaml")), ids=lambda path: path.name)
def test_example_configs_are_valid(path):
    check_config(yaml.safe_load(path.read_text()))


def check_report_adds_up(report: dict) -> None:
    previous = report["loading"]["rows_kept"]
    for step in report["steps"]:
        assert step["rows_in"] == previous and step["dropped"] == step["rows_in"] - step["rows_out"]
        previous = step["rows_out"]
    assert report["rows_out"] == previous


def test_static_pipeline_on_math_train(shared_math_data, tmp_path, capsys):
    config = yaml.safe_load((CONFIG_DIR / "math_static.yaml").read_text())
    config["input"]["dataset_name"] = str(shared_math_data / "math_train.jsonl")
    config["steps"][2]["eval_sets"] = [str(shared_math_data / "aime24.jsonl"), str(shared_math_data / "math500.jsonl")]
    config_path = tmp_path / "static.yaml"
    config_path.write_text(yaml.safe_dump(config))
    out = tmp_path / "out" / "math.jsonl"
    assert main(["--config", str(config_path), "--output", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "| 1 | dedup |" in printed and "| 3 | decontaminate |" in printed

    report = json.loads((tmp_path / "out" / "math.jsonl.report.json").read_text())
    check_report_adds_up(report)
    assert report["loading"]["rows_in"] == 7474 and report["loading"]["rows_dropped"] == 4
    assert report["loading"]["reasons"] == {"answer is None": 2, "answer is ''": 2}
    dedup, question_type, decontaminate = report["steps"]
    assert dedup["dropped"] == 3  # checked against a brute force in test_dedup.py
    assert question_type["reasons"]["multiple_choice"] > 100 and question_type["dropped"] == question_type["flagged"]
    assert 0 < decontaminate["dropped"] < 100
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == report["rows_out"] and {"prompt", "answer", "id", "verifier"} <= set(rows[0])
    matches = [
        json.loads(line)
        for line in (tmp_path / "out" / "math.jsonl.report.step3.decontamination.jsonl").read_text().splitlines()
    ]
    assert len({m["train_id"] for m in matches}) == decontaminate["dropped"]
    assert not {m["train_id"] for m in matches} & {row["id"] for row in rows}
    assert (tmp_path / "out" / "math.jsonl.report.md").read_text().startswith("# data_filters report")


@pytest.fixture(scope="module")
def guessing_model_dir(shared_dir, tiny_model_dir):
    return build_once(shared_dir, "tiny-guessing", lambda target: build_guessing_model(target, tiny_model_dir))


def test_sampling_pipeline_with_the_guessing_model(guessing_model_dir, tmp_path):
    questions = [f"a={i} b=a. Find b." for i in range(8)]
    answers = ["7", "3", "42", "7", "42", "3", None, "7"]
    rows = [{"problem": q, "answer": a} for q, a in zip(questions, answers, strict=True)]
    rows.append({"problem": questions[0], "answer": "7"})  # a duplicate
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    config = {
        "input": {"dataset_name": str(source), "on_error": "drop"},
        "model": {"name_or_path": str(guessing_model_dir), "backend": "transformers", "batch_size": 32},
        "steps": [
            {"step": "dedup"},
            {"step": "pass_rate", "n": 16, "max_new_tokens": 12, "keep": "window", "lo": 0.0, "hi": 0.95},
            {"step": "curriculum_buckets"},
            {"step": "no_think", "n": 16, "max_new_tokens": 12, "mode": "tag"},
        ],
        "output": {"path": str(tmp_path / "filtered"), "report_dir": str(tmp_path / "report")},
    }
    dataset, report = run_pipeline(config, progress=False)
    saved = load_from_disk(str(tmp_path / "filtered"))  # a folder path: save_to_disk
    assert saved["id"] == dataset["id"]
    data = json.loads((tmp_path / "report" / "filtered.report.json").read_text())
    check_report_adds_up(data)
    assert data["loading"]["rows_dropped"] == 1 and data["steps"][0]["dropped"] == 1
    assert sorted(saved["answer"]) == ["3", "3", "42", "42", "7", "7", "7"]  # p <= 0.95 keeps every row here
    for answer, rate, bucket, direct in zip(
        saved["answer"], saved["pass_rate"], saved["difficulty_bucket"], saved["no_think_pass_rate"], strict=True
    ):
        assert bucket == difficulty_bucket(rate)
        if answer == "42":
            assert rate == 0.0 and bucket == "unsolved" and direct == 0.0
        else:
            assert 0.1 < rate < 0.9 and direct > 0  # solved with or without thinking: Qwen3's rule would drop it
    assert data["steps"][3]["flagged"] == 5 and data["steps"][3]["rows_out"] == 7  # tag mode keeps them


@pytest.mark.parametrize(
    "change, message",
    [
        ({"steps": [{"step": "dedupe"}]}, "unknown step 'dedupe'"),
        (
            {"steps": [{"step": "decontaminate", "eval_set": ["aime24"]}]},
            r"steps\[0\] \(decontaminate\): unknown option",
        ),
        ({"steps": [{"step": "decontaminate"}]}, r"option\(s\) \['eval_sets'\] are required"),
        ({"input": {"dataset_name": "x.jsonl", "on_eror": "drop"}}, "input: unknown option"),
        ({"outputs": {}}, "unknown config section"),
    ],
)
def test_config_mistakes_are_named(change, message):
    config = {"input": {"dataset_name": "synthetic:1"}, "steps": []} | change
    with pytest.raises(ConfigError, match=message):
        check_config(config)


def test_bad_values_and_missing_models_exit_with_a_message(tmp_path, capsys):
    config = tmp_path / "bad.yaml"
    config.write_text(
        yaml.safe_dump(
            {"input": {"dataset_name": "synthetic:1", "dataset_num_rows": 3}, "steps": [{"step": "pass_rate"}]}
        )
    )
    assert main(["--config", str(config), "--quiet"]) == 2
    assert "sampling steps need a model" in capsys.readouterr().err
    config.write_text(yaml.safe_dump({"input": {"dataset_name": "synthetic:1", "on_error": "skip"}}))
    assert main(["--config", str(config), "--quiet"]) == 2
    assert "on_error must be one of" in capsys.readouterr().err


def test_the_module_entry_point(shared_math_data, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "input": {"dataset_name": str(shared_math_data / "amc.jsonl")},
                "steps": [{"step": "question_type"}, {"step": "dedup", "mode": "tag"}],
                "output": {"path": str(tmp_path / "amc.parquet")},
            }
        )
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "data_filters", "--config", str(config), "--quiet"],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "rows: 83 in, 83 out" in done.stdout
    assert (tmp_path / "amc.parquet").is_file() and (tmp_path / "amc.parquet.report.md").is_file()
