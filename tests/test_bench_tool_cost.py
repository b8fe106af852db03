"""scripts/bench/tool_cost.py's own logic, small: a session of cells timed four ways (python -c, the replay program
bare, the tool replaying, the tool's live interpreter) with their answers agreeing, the table and ratio lines printed, and one tool-using GRPO step whose
scripted policy calls the tool twice on half its rows (the second call replaying the first)."""

from __future__ import annotations

import pytest

from tests.conftest import load_bench


def test_a_session_is_timed_in_every_arm_and_the_ratios_are_printed(capsys):
    bench = load_bench("tool_cost")
    cells = [("define", "v = 6 * 7"), ("use", "print(v)"), ("raise", "print(1 / 0)"), ("still there", "print(v + 1)")]
    times = bench.session_times(cells)
    assert set(times) == {"python -c", "replay bare", "tool, replay", "tool"}
    assert all(len(seconds) == len(cells) and min(seconds) > 0 for seconds in times.values())
    assert bench.replay_bare_call(["v = 6 * 7"], "print(v)") == "42\n"
    with pytest.raises(RuntimeError, match="disagree"):  # the arms' answers are checked against each other
        bench.session_times([("differs", "import sys\nprint(sys.flags.isolated)")])  # -I in the sandbox
    bench.print_calls(bench.call_figures(1))
    printed = capsys.readouterr().out
    assert "| use it (replayed) |" in printed and "| whole session |" in printed
    assert "ratio tool / python -c, whole session (target <= 2x): " in printed
    assert "ratio tool, replay / python -c, whole session: " in printed


def test_a_tool_using_step_is_split_into_its_phases(capsys):
    bench = load_bench("tool_cost")
    figures = bench.step_figures(1)
    means = figures["means"]
    # 4 of 8 rows call twice (the scripted calls), the others answer: 8 calls over 8 completions
    assert means["tools/calls_per_completion"] == pytest.approx(1.0) and means["tools/turns_mean"] == pytest.approx(2.0)
    assert means["tools/failure_frac"] == 0.0  # the second call found what the first defined
    assert means["timing_s/tools"] > 0 and means["timing_s/generate"] > 0 and means["timing_s/forward_backward"] > 0
    masks = figures["first_batch"]["tool_mask"]
    assert [0 in mask for mask in masks] == [row % 2 == 0 for row in range(len(masks))]
    bench.print_step(figures)
    printed = capsys.readouterr().out
    assert "| tools | " in printed and "ratio tools / step (transformers): " in printed
