"""scripts/bench/answer_link.py: the three shares of an evaluation's samples, counted by hand on a small run folder."""

from __future__ import annotations

import json

from tests.conftest import REPO


def load_script():
    import importlib.util

    spec = importlib.util.spec_from_file_location("answer_link", REPO / "scripts/bench/answer_link.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_shares_counted_by_hand(tmp_path, capsys):
    answer_link = load_script()
    run = tmp_path / "eval" / "arithmetic_1-3"  # eval.evaluate writes one folder down
    run.mkdir(parents=True)
    problems = [{"id": "p1", "answer": "15"}, {"id": "p2", "answer": 30}]
    samples = [
        {"id": "p1", "text": "30 / 2 = 15\n\\boxed{15}", "extracted": "15", "correct": True},  # right, linked
        {"id": "p1", "text": "30 / 2 = 15\n\\boxed{1}", "extracted": "1", "correct": False},  # working right, unlinked
        {"id": "p2", "text": "6 * 5 = 31\n\\boxed{31}", "extracted": "31", "correct": False},  # linked, working wrong
        {"id": "p2", "text": "six times five\n\\boxed{30}", "extracted": "30", "correct": True},  # right, no working
        {"id": "p2", "text": "6 * 5 = 30.0 so \\boxed{N}", "extracted": "N", "correct": False},  # 30.0 is 30
    ]
    (run / "per_problem.jsonl").write_text("".join(json.dumps(p) + "\n" for p in problems))
    (run / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    (run / "summary.json").write_text("{}")  # what marks a finished evaluation (eval.compare.load_run)
    results = answer_link.main([str(tmp_path / "eval")])
    result = results[str((tmp_path / "eval").resolve())]
    assert result["samples"] == 5
    assert result["right"] == 2 / 5
    assert result["boxed_is_working"] == 2 / 5
    assert result["working_right"] == 3 / 5
    assert "| 5 | 0.400 | 0.400 | 0.600 |" in capsys.readouterr().out
