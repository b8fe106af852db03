"""scripts/demo.py --fast: the whole embedded pipeline runs, prints the before/after table, and a rerun
skips the stages whose output exists."""

from __future__ import annotations

import json
import sys

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))

import demo  # noqa: E402


def test_fast_demo_runs_end_to_end_and_reruns_cheaply(tmp_path, capsys):
    out = tmp_path / "demo"
    result = demo.main(["--fast", "--threads", "1", "--output-dir", str(out)])
    printed = capsys.readouterr().out
    assert "| level | base | cold-start SFT |" in printed
    assert sorted(result["after"]) == demo.EVAL_LEVELS
    for level in demo.EVAL_LEVELS:
        assert 0.0 <= result["before"][level]["pass@1"] <= 1.0
    assert (out / "report.md").read_text().count("\n|") >= len(demo.EVAL_LEVELS) + 1
    sft_card = out / "sft" / "run_card.json"
    assert json.loads(sft_card.read_text())["config"]["training"]["max_steps"] == 8
    stamp = sft_card.stat().st_mtime_ns

    again = demo.main(["--fast", "--threads", "1", "--output-dir", str(out)])
    assert sft_card.stat().st_mtime_ns == stamp  # SFT was not redone
    assert again["after"] == result["after"]


def test_demo_is_deterministic_for_a_seed(tmp_path):
    first = demo.main(["--fast", "--threads", "1", "--output-dir", str(tmp_path / "a"), "--seed", "3"])
    second = demo.main(["--fast", "--threads", "1", "--output-dir", str(tmp_path / "b"), "--seed", "3"])
    assert first == second
    a = json.loads((tmp_path / "a" / "eval_sft.json").read_text())
    b = json.loads((tmp_path / "b" / "eval_sft.json").read_text())
    assert a["by_level"] == b["by_level"]
