"""Cached traces and rounds are reused only when the same inputs would make them again (issue 16, finding 3).

Distillation: the first run keeps no trace (verify_traces on, a teacher that is never right); rerun with
verify_traces off, the traces must be sampled again, not reused (which failed with advice to set the option
already set). Rejection sampling: a finished round is skipped on a rerun with the same inputs and redone
when a sampling option or the data file changed. The sampler and the trainer are replaced by stand-ins
that count their calls: what is tested is the decision to reuse, which happens before either runs.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from trl import ModelConfig, SFTConfig

from basics.atomic_files import write_jsonl
from recipes import rejection_sampling as rs
from recipes.common import held_out_eval as held_out
from recipes.common.command_line.config import parse_recipe_args
from recipes.common.fingerprint import changes
from recipes.stages.distill import stages as distill_stages
from recipes.stages.distill.arguments import DistillScriptArguments
from recipes.stages.rejection_sampling import rounds
from tasks.schema import load_rows
from tests.support.guessing_model import rows_with_gold


def result(row_id: str, correct: int):
    return SimpleNamespace(id=row_id, n=2, num_correct=correct, pass_at=lambda k, c=correct: c / 2)


@pytest.fixture
def stand_ins(monkeypatch):
    """Replace sampling and training in both recipes; `calls` counts what ran."""
    calls = {"sampled": 0, "trained": 0}

    def collect(sampler, rows, args, seed, require_correct=True, hint_template=None, progress=True):
        calls["sampled"] += 1
        rows = list(rows)
        kept = [] if require_correct else [{"id": rows[0]["id"], "prompt": rows[0]["prompt"], "solution": "so 7"}]
        return kept, [result(row["id"], 0 if require_correct else 1) for row in rows]

    def train(model, conversations, training_args, model_args, output_dir=None, **kwargs):
        calls["trained"] += 1
        output_dir.mkdir(parents=True, exist_ok=True)
        return output_dir

    stand_in = {
        "collect_traces": collect,
        "make_trace_sampler": lambda *a, **k: SimpleNamespace(close=lambda: None),
        "evaluate_pass_at_1": lambda *a, **k: None,
        "train_sft": train,
    }
    # wherever the two recipes look these names up: the scripts and the modules that hold their steps
    for module in (distill_stages, rounds, rs, held_out):
        for name, function in stand_in.items():
            if hasattr(module, name):
                monkeypatch.setattr(module, name, function)
    return calls


def test_distillation_samples_again_when_verify_traces_changed(stand_ins, tmp_path):
    data = tmp_path / "train.jsonl"
    write_jsonl(data, rows_with_gold("7", "train", 200))

    def offline(*flags: str):
        args = parse_recipe_args(
            (DistillScriptArguments, SFTConfig, ModelConfig), "demo/distill.yaml",
            ["--teacher_model_name_or_path", "teacher", "--output_dir", str(tmp_path / "out"),
             "--dataset_name", str(data), "--eval_samples_per_problem", "0", *flags],
        )  # fmt: skip
        rows = list(load_rows(args[0]))
        return distill_stages.distill_offline(*args, "teacher", "student", rows, [])

    with pytest.raises(ValueError, match="no trace worth keeping"):
        offline("--verify_traces", "true")
    assert stand_ins == {"sampled": 1, "trained": 0}
    stats = offline("--verify_traces", "false")  # the cached, empty traces are stale now
    assert stand_ins == {"sampled": 2, "trained": 1} and stats["traces_kept"] == 1
    offline("--verify_traces", "false")  # nothing changed: traces and student reused
    assert stand_ins == {"sampled": 2, "trained": 1}
    offline("--verify_traces", "false", "--learning_rate", "3.5e-4")  # traces reused, the student is not
    assert stand_ins == {"sampled": 2, "trained": 2}


def test_rejection_sampling_redoes_a_round_whose_inputs_changed(stand_ins, tiny_model_dir, tmp_path):
    data = tmp_path / "train.jsonl"
    write_jsonl(data, rows_with_gold("7", "train", 200))
    out = tmp_path / "rs"

    def run(*flags: str):
        args = parse_recipe_args(
            (rs.RejectionSamplingArguments, SFTConfig, ModelConfig), rs.DEFAULT_CONFIG,
            ["--model_name_or_path", str(tiny_model_dir), "--demo_model_if_missing", "false", "--output_dir", str(out),
             "--dataset_name", str(data), "--num_rounds", "1", "--eval_samples_per_problem", "0", *flags],
        )  # fmt: skip
        return rs.main(*args)

    run()  # round 1 samples; nothing verified, so it stops before training
    assert stand_ins["sampled"] == 1
    run()
    assert stand_ins["sampled"] == 1  # complete and unchanged: skipped
    run("--sampling", "{temperature: 0.7}")
    assert stand_ins["sampled"] == 2  # a sampling option changed: redone
    stats = json.loads((out / "round_1" / "stats.json").read_text())
    assert stats["fingerprint"]["sampling"]["sampling"]["temperature"] == 0.7
    write_jsonl(data, rows_with_gold("7", "train", 201))  # the data file changed
    run("--sampling", "{temperature: 0.7}")
    assert stand_ins["sampled"] == 3


def test_changes_name_what_differs():
    old = {"sampling": {"verify_traces": True, "n": 4}, "seed": 0}
    new = {"sampling": {"verify_traces": False, "n": 4}, "seed": 0}
    assert changes(old, new) == ["sampling.verify_traces: true -> false"]
    assert changes(old, old) == []
    assert changes(None, new) == ["no fingerprint stored (written by an older version)"]
