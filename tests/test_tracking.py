"""Training curves outside the demo (issue 16, finding 7): `report_to: tensorboard` writes its event files
offline, and `python -m recipes.plot_curves` draws one or several runs' metrics.jsonl to a PNG."""

from __future__ import annotations

import json
import re
import struct

import pytest

from recipes import plot_curves, sft
from recipes.stages.plot_curves import figure as curve_figure
from tests.conftest import REPO


def test_the_trackers_and_the_suite_s_own_needs_are_extras():
    """`report_to` trackers are one extra away; the suite's DeepSpeed and TensorBoard runs are in `dev`."""
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = {extra: {re.split(r"[<>=\[ ]", spec)[0].lower() for spec in specs} for extra, specs in extras.items()}
    assert {"tensorboard", "trackio", "wandb"} <= names["tracking"]
    assert {"deepspeed", "tensorboardx"} <= names["dev"]


def read_scalars(event_file) -> dict[str, list[tuple[int, float]]]:
    """The scalar summaries of a TensorBoard event file (TFRecord: length, crc, Event proto, crc)."""
    from tensorboardX.proto import event_pb2

    scalars: dict[str, list] = {}
    data = event_file.read_bytes()
    offset = 0
    while offset < len(data):
        (length,) = struct.unpack("<Q", data[offset : offset + 8])
        event = event_pb2.Event.FromString(data[offset + 12 : offset + 12 + length])
        offset += 12 + length + 4
        for value in event.summary.value:
            scalars.setdefault(value.tag, []).append((event.step, value.simple_value))
    return scalars


def short_sft_run(model_dir, out, steps: int, report_to: str) -> None:
    """A few logged SFT steps of the tiny model, no checkpoint."""
    argv = [
        "--model_name_or_path", str(model_dir), "--output_dir", str(out), "--max_steps", str(steps),
        "--logging_steps", "1", "--dataset_num_rows", "8", "--per_device_train_batch_size", "4",
        "--save_strategy", "no", "--report_to", report_to, "--disable_tqdm", "true",
    ]  # fmt: skip
    sft.main(*sft.make_parser().parse_args(argv))


def test_a_tensorboard_run_writes_its_curves_offline(tiny_model_dir, tmp_path):
    out = tmp_path / "sft"
    short_sft_run(tiny_model_dir, out, 2, "tensorboard")
    event_files = list(out.rglob("events.out.tfevents.*"))
    assert event_files, sorted(str(p) for p in out.rglob("*"))
    scalars: dict = {}
    for event_file in event_files:
        scalars.update(read_scalars(event_file))
    assert [step for step, _ in scalars["train/loss"]] == [1, 2]
    assert all(loss > 0 for _, loss in scalars["train/loss"])


def write_metrics(folder, records):
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    return folder


def test_plot_curves_draws_several_runs(tmp_path):
    grpo = write_metrics(
        tmp_path / "grpo",
        [{"step": 1, "reward": 0.1, "entropy": 2.0, "loss": 0.5}, {"step": 2, "reward": 0.3, "entropy": 1.8}],
    )
    dapo = write_metrics(tmp_path / "dapo", [{"step": 1, "reward": 0.2}, {"step": 2, "reward": 0.4}, {"step": 3}])
    sft_run = tmp_path / "sft"  # an SFT run: no metrics.jsonl, the trainer state of its newest checkpoint
    for step in (1, 2):
        (sft_run / f"checkpoint-{step}").mkdir(parents=True)
        history = [{"step": s, "loss": value} for s, value in ((1, 9.0), (2, 3.0)) if s <= step]
        (sft_run / f"checkpoint-{step}" / "trainer_state.json").write_text(json.dumps({"log_history": history}))
    out = tmp_path / "plots" / "curves.png"

    assert plot_curves.main([str(grpo), str(dapo), str(sft_run), "--out", str(out)]) == out
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    drawn = plot_curves.plot_curves([grpo, dapo, sft_run], tmp_path / "again.png")
    assert list(drawn) == ["reward", "entropy", "loss"]  # the usual metrics, in order, that were logged
    assert drawn["reward"] == {str(grpo): [(1, 0.1), (2, 0.3)], str(dapo): [(1, 0.2), (2, 0.4)]}
    assert drawn["loss"] == {str(grpo): [(1, 0.5)], str(sft_run): [(1, 9.0), (2, 3.0)]}
    only = plot_curves.plot_curves([dapo], tmp_path / "one.png", metrics=["reward"])
    assert only == {"reward": {str(dapo): [(1, 0.2), (2, 0.4)]}}


def test_plot_curves_says_what_is_missing(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit) as exit_info:
        plot_curves.main([str(tmp_path / "empty"), "--out", str(tmp_path / "x.png")])
    assert exit_info.value.code == 2 and "neither metrics.jsonl nor a trainer_state.json" in capsys.readouterr().err


def test_an_sft_run_without_checkpoints_writes_metrics_jsonl_that_plot_curves_draws(tiny_model_dir, tmp_path):
    """Issue 28, item 10: the shipped SFT configs save no checkpoint, so there is no trainer_state.json to read."""
    out = tmp_path / "sft"
    short_sft_run(tiny_model_dir, out, 3, "none")
    assert not list(out.rglob("trainer_state.json"))
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    stepped = [record for record in records if "loss" in record]
    assert [record["step"] for record in stepped] == [1, 2, 3]
    assert all(record["loss"] > 0 and "learning_rate" in record for record in stepped)

    png = tmp_path / "sft.png"
    assert plot_curves.main([str(out), "--out", str(png)]) == png
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    drawn = plot_curves.plot_curves([out], tmp_path / "lr.png", metrics=["loss", "learning_rate"])
    assert [step for step, _ in drawn["loss"][str(out)]] == [1, 2, 3]
    assert [step for step, _ in drawn["learning_rate"][str(out)]] == [1, 2, 3]


def test_a_misspelled_metric_is_an_error_that_suggests_the_logged_name(tmp_path, capsys):
    run = write_metrics(tmp_path / "sft", [{"step": 1, "loss": 2.0, "learning_rate": 1e-4}, {"step": 2, "loss": 1.5}])
    with pytest.raises(SystemExit) as exit_info:
        plot_curves.main([str(run), "--metrics", "los", "--out", str(tmp_path / "x.png")])
    error = capsys.readouterr().err
    assert exit_info.value.code == 2 and len(error.strip().splitlines()) == 1, error
    assert "'los'" in error and "did you mean 'loss'?" in error and "learning_rate, loss" in error
    assert not (tmp_path / "x.png").exists()
    with pytest.raises(SystemExit):  # one good name does not carry a misspelled one
        plot_curves.main([str(run), "--metrics", "loss", "learnig_rate", "--out", str(tmp_path / "y.png")])
    assert "did you mean 'learning_rate'?" in capsys.readouterr().err


def test_plot_curves_windows_prints_the_mean_of_every_n_steps(tmp_path, capsys):
    """--windows N: the figures a write-up quotes (means over steps 1-N, N+1-2N, ...), computed by hand here."""
    run = write_metrics(
        tmp_path / "dapo",
        [{"step": 1, "entropy": 0.5}, {"step": 2, "entropy": 0.3}, {"step": 3, "entropy": 0.1, "kl": 0.2},
         {"step": 5, "kl": 0.6}, {"step": 7, "entropy": 0.9}],
    )  # fmt: skip
    assert curve_figure.window_means([(1, 0.5), (2, 0.3), (3, 0.1), (7, 0.9)], 3) == {"1-3": 0.3, "7-9": 0.9}
    plot_curves.main([str(run), "--metrics", "entropy", "kl", "--windows", "3", "--out", str(tmp_path / "c.png")])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "| metric | run | 1-3 | 4-6 | 7-9 |"
    assert lines[2] == f"| entropy | {run} | 0.3 |  | 0.9 |"  # (0.5 + 0.3 + 0.1) / 3; no entropy in 4-6
    assert lines[3] == f"| kl | {run} | 0.2 | 0.6 |  |"
    with pytest.raises(SystemExit):
        plot_curves.main([str(run), "--windows", "0"])


def test_plot_curves_legend_names_tell_runs_of_the_same_folder_name_apart():
    runs = ["out/dapo_long/seed0", "out/remedy_long/seed0", "out/dapo_long/seed1"]
    assert curve_figure.short_names(runs) == {
        "out/dapo_long/seed0": "dapo_long/seed0", "out/remedy_long/seed0": "remedy_long/seed0",
        "out/dapo_long/seed1": "dapo_long/seed1"}  # fmt: skip
    assert curve_figure.short_names(["a/grpo", "b/dapo"]) == {"a/grpo": "grpo", "b/dapo": "dapo"}


def test_plot_curves_labels_name_the_runs_in_the_legend(tmp_path, monkeypatch, capsys):
    runs = [write_metrics(tmp_path / name, [{"step": 1, "loss": 1.0}]) for name in ("dapo", "seed0")]
    legends = []
    import matplotlib.figure

    original = matplotlib.figure.Figure.savefig
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", lambda figure, *a, **k: legends.append(
        [[text.get_text() for text in legend.get_texts()] for legend in figure.legends]) or original(figure, *a, **k))  # fmt: skip
    out = tmp_path / "c.png"
    plot_curves.main([*map(str, runs), "--metrics", "loss", "--labels", "sync s0", "stale s0", "--out", str(out)])
    assert out.is_file() and legends == [[["sync s0", "stale s0"]]]  # one legend for the figure, every run in it
    with pytest.raises(SystemExit) as exit_info:  # a label short: refused before anything is drawn
        plot_curves.main([*map(str, runs), "--labels", "sync s0", "--out", str(tmp_path / "d.png")])
    assert exit_info.value.code == 2 and "one label per run" in capsys.readouterr().err
    assert not (tmp_path / "d.png").exists()
