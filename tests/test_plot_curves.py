"""`python -m recipes.plot_curves` draws figures a reader can use (issue 57, item 8): one legend for the whole
figure naming every run, a run's colour the same in every panel, the PNG's absolute path in the log, and seeds
of one arm drawn as a group (mean line, min-max band, optional smoothing and raw lines). Asserted on the
matplotlib objects the command saves, not on pixels."""

from __future__ import annotations

import json
import logging

import pytest

from recipes import plot_curves
from recipes.stages.plot_curves import figure as curve_figure


def write_metrics(folder, records):
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    return folder


@pytest.fixture
def saved_figures(monkeypatch):
    """The Figure objects the command saves, in order (they stay readable after pyplot closes them)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    figures = []
    original = Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda figure, *a, **k: figures.append(figure) or original(figure, *a, **k))
    return figures


def lines_named(figure, label):
    """Per panel title, the line whose legend label is `label`."""
    return {axis.get_title(): line for axis in figure.axes for line in axis.get_lines() if line.get_label() == label}


def band_bounds(figure, panel, gid):
    """{step: (low, high)} of the band `gid` in a panel: fill_between's polygon holds both bounds at each step."""
    (axis,) = [axis for axis in figure.axes if axis.get_title() == panel]
    (band,) = [collection for collection in axis.collections if collection.get_gid() == gid]
    at_step = {}
    for step, value in band.get_paths()[0].vertices:
        at_step.setdefault(float(step), set()).add(round(float(value), 9))
    return {step: (min(values), max(values)) for step, values in at_step.items()}


def assert_bounds(bounds, expected):
    assert sorted(bounds) == sorted(expected)
    assert [bounds[step] for step in sorted(bounds)] == [pytest.approx(expected[step]) for step in sorted(bounds)]


def two_runs(tmp_path):
    """'late' logged no reward, so the reward panel (the first) has only 'early': what moved colours and legends."""
    late = write_metrics(tmp_path / "late", [{"step": 1, "loss": 2.0}, {"step": 2, "loss": 1.0}])
    early = write_metrics(tmp_path / "early", [{"step": 1, "reward": 0.1, "loss": 3.0}, {"step": 2, "reward": 0.2}])
    return late, early


def test_one_legend_for_the_figure_names_every_run(tmp_path, saved_figures):
    late, early = two_runs(tmp_path)
    plot_curves.main([str(late), str(early), "--out", str(tmp_path / "c.png")])
    (figure,) = saved_figures
    assert [axis.get_title() for axis in figure.axes] == ["reward", "loss"]
    assert len(figure.legends) == 1 and all(axis.get_legend() is None for axis in figure.axes)
    assert [text.get_text() for text in figure.legends[0].get_texts()] == ["late", "early"]

    plot_curves.main([str(late), str(early), "--labels", "sync", "stale", "--out", str(tmp_path / "d.png")])
    assert [text.get_text() for text in saved_figures[1].legends[0].get_texts()] == ["sync", "stale"]


def test_a_run_keeps_its_colour_in_every_panel(tmp_path, saved_figures):
    late, early = two_runs(tmp_path)
    plot_curves.main([str(late), str(early), "--out", str(tmp_path / "c.png")])
    (figure,) = saved_figures
    early_lines = lines_named(figure, "early")
    assert set(early_lines) == {"reward", "loss"}
    assert early_lines["reward"].get_color() == early_lines["loss"].get_color()
    assert lines_named(figure, "late")["loss"].get_color() != early_lines["loss"].get_color()


def test_the_log_names_the_figure_s_absolute_path(tmp_path, monkeypatch, caplog):
    late, early = two_runs(tmp_path)
    monkeypatch.chdir(tmp_path)
    caplog.set_level(logging.INFO, logger="recipes.plot_curves")
    plot_curves.main([str(late), str(early), "--out", "plots/c.png"])
    assert str((tmp_path / "plots" / "c.png").resolve()) in caplog.text
    caplog.clear()
    assert plot_curves.main([str(late)]) == plot_curves.Path("curves.png")  # the default stays ./curves.png
    assert (tmp_path / "curves.png").is_file() and str((tmp_path / "curves.png").resolve()) in caplog.text


def seeded_arms(tmp_path):
    """dapo's seed 2 skipped step 3: that step's mean and band are over seeds 0 and 1."""
    rewards = {"dapo/seed0": [0.1, 0.3, 0.5, 0.7], "dapo/seed1": [0.2, 0.2, 0.4, 0.6],
               "dapo/seed2": [0.3, 0.4, None, 0.8], "remedy/seed0": [0.5, 0.5, 0.5, 0.5],
               "remedy/seed1": [0.6, 0.6, 0.6, 0.6]}  # fmt: skip
    return [write_metrics(tmp_path / "out" / run, [{"step": step, "reward": value} for step, value in
                                                   enumerate(values, start=1) if value is not None])
            for run, values in rewards.items()]  # fmt: skip


def test_group_seeds_draws_each_arm_as_the_mean_of_its_runs_with_a_min_max_band(tmp_path, saved_figures):
    runs = seeded_arms(tmp_path)
    plot_curves.main([*map(str, runs), "--group-seeds", "--out", str(tmp_path / "c.png")])
    (figure,) = saved_figures
    assert [text.get_text() for text in figure.legends[0].get_texts()] == ["dapo (3 runs)", "remedy (2 runs)"]
    dapo = lines_named(figure, "dapo")["reward"]
    assert list(dapo.get_xdata()) == [1, 2, 3, 4]
    assert list(dapo.get_ydata()) == pytest.approx([0.6 / 3, 0.9 / 3, 0.9 / 2, 2.1 / 3])
    assert_bounds(
        band_bounds(figure, "reward", "dapo band"), {1: (0.1, 0.3), 2: (0.2, 0.4), 3: (0.4, 0.5), 4: (0.6, 0.8)}
    )
    assert list(lines_named(figure, "remedy")["reward"].get_ydata()) == pytest.approx([0.55] * 4)


def test_smooth_averages_each_run_s_last_n_logged_values_before_the_group_mean(tmp_path, saved_figures):
    runs = seeded_arms(tmp_path)
    plot_curves.main([*map(str, runs), "--group-seeds", "--smooth", "2", "--out", str(tmp_path / "c.png")])
    (figure,) = saved_figures
    # smoothed over 2 logged values: seed0 0.1 0.2 0.4 0.6; seed1 0.2 0.2 0.3 0.5; seed2 0.3 0.35 - 0.6 (steps 2, 4)
    dapo = lines_named(figure, "dapo")["reward"]
    assert list(dapo.get_ydata()) == pytest.approx([0.6 / 3, 0.75 / 3, 0.7 / 2, 1.7 / 3])
    assert_bounds(
        band_bounds(figure, "reward", "dapo band"), {1: (0.1, 0.3), 2: (0.2, 0.35), 3: (0.3, 0.4), 4: (0.5, 0.6)}
    )
    assert "moving average over 2 logged steps" in figure.legends[0].get_title().get_text()
    with pytest.raises(SystemExit):
        plot_curves.main([*map(str, runs), "--smooth", "0"])


def test_groups_named_by_hand_and_raw_lines_in_the_group_s_colour(tmp_path, saved_figures):
    runs = seeded_arms(tmp_path)
    sync, stale = ",".join(map(str, runs[:2])), ",".join(map(str, runs[3:]))
    plot_curves.main([str(runs[2]), "--raw", "--out", str(tmp_path / "c.png"), "--groups", f"sync={sync}",
                      f"stale={stale}"])  # fmt: skip
    (figure,) = saved_figures
    assert [text.get_text() for text in figure.legends[0].get_texts()] == ["seed2", "sync (2 runs)", "stale (2 runs)"]
    (axis,) = figure.axes
    sync_line = lines_named(figure, "sync")["reward"]
    assert list(sync_line.get_ydata()) == pytest.approx([0.15, 0.25, 0.45, 0.65])
    thin = [
        line
        for line in axis.get_lines()
        if line.get_label().startswith("_") and line.get_color() == sync_line.get_color()
    ]
    assert sorted(list(line.get_ydata()) for line in thin) == [[0.1, 0.3, 0.5, 0.7], [0.2, 0.2, 0.4, 0.6]]


def test_grouping_is_asked_for_and_conservative():
    runs = ["out/dapo/seed0", "out/dapo/seed1", "out/remedy/seed0", "demo/dapo", "demo/dapo_s1", "demo/dapo_s2"]
    assert list(curve_figure.arms_of(runs).values()) == [[run] for run in runs]  # no flag: every run on its own
    assert curve_figure.arms_of(runs, seeds=True) == {
        "out/dapo": ["out/dapo/seed0", "out/dapo/seed1"], "remedy/seed0": ["out/remedy/seed0"],  # one seed: a run
        "demo/dapo": ["demo/dapo", "demo/dapo_s1", "demo/dapo_s2"]}  # fmt: skip
    labels = ["a", "b", "r0", "c", "d", "e"]
    assert curve_figure.arms_of(runs, labels, seeds=True)["r0"] == ["out/remedy/seed0"]  # --labels name lone runs


def test_windows_keeps_a_row_per_run_and_adds_one_per_group(tmp_path, capsys):
    runs = seeded_arms(tmp_path)
    plot_curves.main([*map(str, runs), "--group-seeds", "--windows", "2", "--out", str(tmp_path / "c.png")])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "| metric | run | 1-2 | 3-4 |"
    assert lines[2] == f"| reward | {runs[0]} | 0.2 | 0.6 |"
    assert len(lines) == 2 + 5 + 2
    # dapo: window 1-2 (0.2 + 0.2 + 0.35) / 3; window 3-4 (0.6 + 0.5 + 0.8) / 3, seed 2 logged only step 4
    assert lines[7] == f"| reward | dapo (mean of 3 runs) | {0.75 / 3:.4g} | {1.9 / 3:.4g} |"
    assert lines[8] == "| reward | remedy (mean of 2 runs) | 0.55 | 0.55 |"


def test_groups_mistakes_are_one_line_errors(tmp_path, capsys):
    runs = seeded_arms(tmp_path)
    for groups in (["sync"], [f"a={runs[0]}", f"b={runs[0]}"], [f"a={runs[0]}", f"a={runs[1]}"]):
        with pytest.raises(SystemExit) as exit_info:
            plot_curves.main(["--groups", *groups, "--out", str(tmp_path / "x.png")])
        assert exit_info.value.code == 2 and len(capsys.readouterr().err.strip().splitlines()) == 1
    with pytest.raises(SystemExit):
        plot_curves.main(["--out", str(tmp_path / "x.png")])
    assert not (tmp_path / "x.png").exists()


def test_the_held_out_interval_is_still_a_band_around_its_run(tmp_path, saved_figures):
    run = write_metrics(tmp_path / "run", [
        {"step": 1, "eval_pass@1": 0.3, "eval_pass@1_low": 0.2, "eval_pass@1_high": 0.4},
        {"step": 2, "eval_pass@1": 0.5, "eval_pass@1_low": 0.35, "eval_pass@1_high": 0.6}])  # fmt: skip
    plot_curves.main([str(run), "--out", str(tmp_path / "c.png")])
    assert_bounds(band_bounds(saved_figures[0], "eval_pass@1", "run interval"), {1: (0.2, 0.4), 2: (0.35, 0.6)})
