"""Issue 40, item 5: `metrics.jsonl` holds one run. At db84883 a resumed run appended to the file, so the steps
between the checkpoint and the interrupt were in it twice (the plot doubled back), and a run that started
afresh in the same output_dir appended to the previous run's lines."""

from __future__ import annotations

import json
from types import SimpleNamespace

from recipes.common.training.monitor import RLVRMonitor


def _lines(steps) -> str:
    return "".join(json.dumps({"step": step, "loss": 1.0 / step}) + "\n" for step in steps)


def _begin(monitor: RLVRMonitor, global_step: int, main: bool = True) -> None:
    state = SimpleNamespace(global_step=global_step, is_world_process_zero=main)
    monitor.on_train_begin(SimpleNamespace(), state, SimpleNamespace())


def test_a_resumed_run_keeps_the_lines_up_to_its_checkpoint(tmp_path):
    (tmp_path / "metrics.jsonl").write_text(_lines([1, 2, 3, 4, 5]) + "not json\n")  # interrupted after 5
    monitor = RLVRMonitor(tmp_path)
    _begin(monitor, global_step=4)  # resumed from checkpoint-4: step 5 comes again
    monitor.on_log(None, SimpleNamespace(global_step=5, is_world_process_zero=True), None, logs={"loss": 0.5})
    steps = [json.loads(line)["step"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4, 5]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["metrics.jsonl"]


def test_a_fresh_run_moves_an_earlier_runs_file_aside(tmp_path):
    earlier = _lines([1, 2, 3])
    (tmp_path / "metrics.jsonl").write_text(earlier)
    monitor = RLVRMonitor(tmp_path)
    _begin(monitor, global_step=0)
    monitor.on_log(None, SimpleNamespace(global_step=1, is_world_process_zero=True), None, logs={"loss": 0.9})
    assert [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()] == [
        {"step": 1, "loss": 0.9}
    ]
    aside = [path for path in tmp_path.iterdir() if path.name.startswith("metrics.previous-")]
    assert len(aside) == 1 and aside[0].read_text() == earlier


def test_only_the_main_process_touches_the_file(tmp_path):
    (tmp_path / "metrics.jsonl").write_text(_lines([1, 2, 3]))
    _begin(RLVRMonitor(tmp_path), global_step=0, main=False)
    _begin(RLVRMonitor(tmp_path), global_step=1, main=False)
    assert (tmp_path / "metrics.jsonl").read_text() == _lines([1, 2, 3])
