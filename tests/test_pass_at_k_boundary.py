"""scripts/bench/pass_at_k_boundary.py: the k grid, the table and crossover from eval.compare (values worked out
by hand), the plot, and one end-to-end run on the tiny model (two evaluations, the comparison, table and plot)."""

from __future__ import annotations

import importlib.util
import json

import pytest

from tests.conftest import REPO


def load_script():
    spec = importlib.util.spec_from_file_location("pass_at_k_boundary", REPO / "scripts/bench/pass_at_k_boundary.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


boundary = load_script()


def summary(points: dict[int, tuple[float, float, float]]) -> dict:
    return {
        "problems": 32,
        "metrics": {f"pass@{k}": {"mean": m, "ci95": [lo, hi]} for k, (m, lo, hi) in points.items()},
    }


def test_k_grid_is_powers_of_two_and_their_halfway_points_up_to_n():
    assert boundary.curve_ks(256) == [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256]
    assert boundary.curve_ks(10) == [1, 2, 3, 4, 6, 8, 10]
    assert boundary.curve_ks(1) == [1]


def test_table_reports_each_k_with_intervals_and_the_crossover(tmp_path):
    from eval.compare import crossover

    # RL ahead at k = 1 and 4 (+0.2, +0.1), behind at 16 (-0.1): on log2 k the difference goes from +0.1 at 2
    # to -0.1 at 4, so it is zero halfway, at log2 k = 3: k = 8.
    ks = [1, 4, 16]
    cold = summary({1: (0.2, 0.1, 0.3), 4: (0.5, 0.4, 0.6), 16: (0.9, 0.85, 0.95)})
    rl = summary({1: (0.4, 0.32, 0.48), 4: (0.6, 0.5, 0.7), 16: (0.8, 0.7, 0.9)})
    cross = crossover(
        ks, [cold["metrics"][f"pass@{k}"]["mean"] for k in ks], [rl["metrics"][f"pass@{k}"]["mean"] for k in ks]
    )
    assert cross == pytest.approx(8.0)
    text = boundary.boundary_table({"cold start": cold, "DAPO": rl}, ks, cross)
    assert text.splitlines()[:5] == [
        "| k | cold start | DAPO | difference |",
        "|---:|---:|---:|---:|",
        "| 1 | 0.200 [0.100, 0.300] | 0.400 [0.320, 0.480] | +0.200 |",
        "| 4 | 0.500 [0.400, 0.600] | 0.600 [0.500, 0.700] | +0.100 (intervals overlap) |",
        "| 16 | 0.900 [0.850, 0.950] | 0.800 [0.700, 0.900] | -0.100 (intervals overlap) |",
    ]
    assert text.endswith("Crossover: the curves cross near k = 8.0 (eval.compare, interpolated on log k).")
    assert "the curves are identical" in boundary.boundary_table({"a": cold, "b": cold}, ks, None)  # not "one ahead"
    higher = summary({1: (0.3, 0.2, 0.4), 4: (0.6, 0.5, 0.7), 16: (0.95, 0.9, 1.0)})
    assert "Crossover: none for k in 1..16: b stays ahead" in boundary.boundary_table(
        {"a": cold, "b": higher}, ks, None
    )
    path = boundary.plot_boundary({"cold start": cold, "DAPO": rl}, ks, cross, tmp_path / "img" / "plot.png", "t")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_end_to_end_on_the_tiny_model(tmp_path, tiny_model_dir, guessing_model_dir):
    out = tmp_path / "bench"
    argv = ["--cold-start", str(tiny_model_dir), "--rl", str(guessing_model_dir), "--levels", "5-6"]
    argv += ["--problems-per-level", "2", "--n", "6", "--output-dir", str(out), "--plot", str(tmp_path / "b.png")]
    result = boundary.main(argv)
    assert result["ks"] == [1, 2, 3, 4, 6]
    for name, label in (("cold_start", "cold start (SFT)"), ("rl", "DAPO")):
        (path,) = (out / name).glob("*/summary.json")
        on_disk = json.loads(path.read_text())
        assert on_disk["problems"] == 4 and result["summaries"][label]["metrics"] == on_disk["metrics"]
        protocol = json.loads((path.parent / "protocol.json").read_text())
        assert (protocol["n"], protocol["temperature"], protocol["max_new_tokens"]) == (6, 1.0, 96)
    table = (out / "pass_at_k_boundary.md").read_text()
    pass_1 = result["summaries"]["DAPO"]["metrics"]["pass@1"]["mean"]
    assert f"| 1 | 0.000 [0.000, 0.000] | {pass_1:.3f} [" in table  # the untrained model answers nothing
    assert result["paired"][1][0] == pytest.approx(pass_1)  # so the paired difference is the other's pass@1
    assert (tmp_path / "b.png").stat().st_size > 0 and (out / "compare" / "compare.md").is_file()
    # a rerun resumes both evaluations: the same figures
    assert boundary.main(argv)["summaries"] == result["summaries"]

    # a third model beside them (--also), compared with the cold start too: here the cold start's own weights, so
    # the same samples (one seed) and a difference of 0 at every k
    again = boundary.main([*argv, "--also", "the same model", str(tiny_model_dir)])
    assert set(again["paired_by_model"]) == {"DAPO", "the same model"}
    assert all(mean == 0.0 for mean, _ in again["paired_by_model"]["the same model"].values())
    assert again["summaries"]["the same model"]["metrics"] == result["summaries"]["cold start (SFT)"]["metrics"]
    table = (out / "pass_at_k_boundary.md").read_text()
    assert "| k | cold start (SFT) | the same model | difference |" in table and "the curves are identical" in table


def test_the_difference_is_paired_over_the_problems_both_runs_scored():
    # p1: 0.2 -> 0.4, p2: 0.5 -> 0.5; p3 unscored by one run and p4 in one run only are left out. Differences
    # 0.2 and 0.0: mean 0.1; a bootstrap over two values draws means 0, 0.1 or 0.2 (a quarter, a half, a
    # quarter of the time), so its 2.5% and 97.5% quantiles are 0.0 and 0.2.
    a = {
        "p1": {"scored": True, "pass@1": 0.2},
        "p2": {"scored": True, "pass@1": 0.5},
        "p3": {"scored": False, "pass@1": 0.0},
        "p4": {"scored": True, "pass@1": 1.0},
    }
    b = {
        "p1": {"scored": True, "pass@1": 0.4},
        "p2": {"scored": True, "pass@1": 0.5},
        "p3": {"scored": True, "pass@1": 1.0},
    }
    paired = boundary.paired_differences(a, b, [1])
    mean, (low, high) = paired[1]
    assert mean == pytest.approx(0.1) and (low, high) == (pytest.approx(0.0), pytest.approx(0.2))
    summaries = {"a": summary({1: (0.35, 0.2, 0.5)}), "b": summary({1: (0.45, 0.4, 0.5)})}
    row = boundary.boundary_table(summaries, [1], None, paired).splitlines()[2]
    assert row == "| 1 | 0.350 [0.200, 0.500] | 0.450 [0.400, 0.500] | +0.100 [+0.000, +0.200] |"
