"""scripts/bench/run_all.py: every benchmark is found, each one's headline is its ratio lines (or its table),
and the results table is written as benchmarks finish."""

from __future__ import annotations

import importlib.util

import pytest

from tests.conftest import REPO


def load_run_all():
    spec = importlib.util.spec_from_file_location("bench_run_all", REPO / "scripts" / "bench" / "run_all.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_benchmark_is_found_and_described():
    run_all = load_run_all()
    names = run_all.benchmarks()
    assert {"bench_rewards", "bench_code", "bench_eval", "grpo_overhead", "sample_efficiency"} <= set(names)
    assert "length_penalty" in names
    assert not {"run_all", "adversarial_corpus", "sample_efficiency_runs", "sample_efficiency_stats",
                "length_penalty_report", "emergence_measures"} & set(names)  # fmt: skip
    assert all(run_all.DESCRIPTIONS.get(name) or run_all._docstring_line(name) for name in names)


def test_the_headline_is_the_ratio_lines_else_the_last_table_rows():
    run_all = load_run_all()
    output = "setup\n| a | b |\n|---|---|\n| x | 1 |\nratio: 3.9x\nratio (2 vs 1): 1.93x\n"
    assert run_all.headline(output) == "ratio: 3.9x<br>ratio (2 vs 1): 1.93x"
    table_only = "| method | pass@1 |\n|---|---:|\n| GRPO | 0.586 |\n| DAPO | 0.488 |\n"
    assert run_all.headline(table_only) == "| method | pass@1 |<br>| GRPO | 0.586 |<br>| DAPO | 0.488 |"
    assert run_all.headline("") == "(no output)"


def test_a_run_writes_the_table_and_a_failure_is_reported(tmp_path, monkeypatch):
    run_all = load_run_all()
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "good.py").write_text('"""A good one."""\nprint("| a |")\nprint("ratio: 2.0x")\n')
    (bench / "bad.py").write_text('"""A bad one."""\nraise SystemExit(3)\n')
    monkeypatch.setattr(run_all, "HERE", bench)
    results = run_all.main(["--output-dir", str(tmp_path / "out")])
    by_name = {result["name"]: result for result in results}
    assert by_name["good"]["returncode"] == 0 and by_name["good"]["headline"] == "ratio: 2.0x"
    assert by_name["bad"]["returncode"] == 3 and by_name["bad"]["headline"].startswith("failed (exit 3)")
    table = (tmp_path / "out" / "results.md").read_text()
    assert "| `good` | A good one. | ratio: 2.0x |" in table and "| `bad` | A bad one. | failed (exit 3)" in table
    assert (tmp_path / "out" / "good.txt").read_text() == "| a |\nratio: 2.0x\n"
    with pytest.raises(SystemExit):
        run_all.main(["--only", "nonexistent", "--output-dir", str(tmp_path / "out")])


def test_no_benchmark_shadows_a_package_it_may_import():
    """Run as a script, a benchmark's folder comes first on sys.path: a file named like one of our packages or
    a standard-library module (eval.py, code.py, rewards.py) would be imported in its place."""
    import sys

    ours = {"basics", "rewards", "tasks", "eval", "data_filters", "recipes", "scripts", "tests"}
    stems = {path.stem for path in (REPO / "scripts" / "bench").glob("*.py")}
    assert not stems & (ours | set(sys.stdlib_module_names))
