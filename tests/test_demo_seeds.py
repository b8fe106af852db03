"""scripts/demo.py --seeds: one demo per seed in seed<k>/, finished seeds skipped, and the report over seeds (mean ±
sample std of every figure, each seed's bootstrap interval, the versions and commit), checked on per-seed stage
outputs written by hand with values whose spreads are worked out here."""

from __future__ import annotations

import json
import sys

import pytest

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))

import demo  # noqa: E402
import demo_seeds  # noqa: E402

LEVELS = range(1, 13)


def stat(mean: float, low: float, high: float) -> dict:
    return {"mean": mean, "ci95": [low, high], "problems": 16}


def row(hard: stat, easy: float = 0.9, stop: float = 1.0, level: float = 0.5) -> dict:
    """One stage's row as demo_report.summarize_stages writes it into report.json (levels as JSON keys)."""
    return {
        "pass@1 (1-4)": stat(easy, easy - 0.05, easy + 0.05),
        "pass@1 (5-12)": hard,
        "pass@16 (5-12)": stat(min(1.0, hard["mean"] + 0.3), 0.0, 1.0),
        "maj@16 (5-12)": stat(hard["mean"], 0.0, 1.0),
        "by_level": {str(level_): level for level_ in LEVELS},
        "stop_rate": stop,
        "mean_tokens": 40.0,
    }


# seed -> (cold start pass@1 5-12, DAPO pass@1 5-12): DAPO 0.4 / 0.5 / 0.6 -> mean 0.5, sample std 0.1;
# cold start 0.2 / 0.25 / 0.3 -> mean 0.25, std 0.05; gains 0.2 / 0.25 / 0.3 -> +0.25 ± 0.05. The intervals are
# apart in seeds 0 and 1 and overlap in seed 2 (cold start up to 0.45, DAPO from 0.40).
HARD = {
    0: (stat(0.20, 0.15, 0.25), stat(0.40, 0.33, 0.47)),
    1: (stat(0.25, 0.20, 0.30), stat(0.50, 0.43, 0.57)),
    2: (stat(0.30, 0.15, 0.45), stat(0.60, 0.40, 0.80)),
}
STOPS = {0: 0.90, 1: 0.95, 2: 1.00}  # mean 0.95, std 0.05
KEPT = {0: 230, 1: 240, 2: 250}  # mean 240, std 10


def report_for(seed: int) -> dict:
    sft, dapo = HARD[seed]
    return {
        "seed": seed,
        "stages": {
            "base": row(stat(0.0, 0.0, 0.0), easy=0.0),
            "sft": row(sft, level=0.2 + 0.1 * seed),  # per level 0.2 / 0.3 / 0.4 -> 0.3 ± 0.1
            "dapo": row(dapo, stop=STOPS[seed]),
        },
        "timings": {},
        "filter": {"rows_in": 800, "rows_out": KEPT[seed]},
    }


ENVIRONMENT = {
    "versions": {"python": "3.11.9", "torch": "2.13.0", "transformers": "5.24.0", "trl": "1.16.0"},
    "git_commit": "0123456789abcdef0123",
    "git_dirty": False,
    "cpu": "x86_64",
    "torch_cpu_capability": "AVX512",
    "torch_threads": 2,
}


def write_seed(out, seed: int, environment: dict | None = ENVIRONMENT) -> None:
    folder = demo_seeds.seed_dir(out, seed)
    folder.mkdir(parents=True)
    (folder / "report.json").write_text(json.dumps(report_for(seed)))
    if environment is not None:
        (folder / "environment.json").write_text(json.dumps(environment))


def no_run(args):
    raise AssertionError(f"seed {args.seed} has its report and must not run again")


def test_report_over_seeds_gives_mean_std_and_each_seeds_interval(tmp_path, monkeypatch):
    for seed in HARD:
        write_seed(tmp_path, seed)
    monkeypatch.setattr(demo, "run_one_seed", no_run)
    aggregate = demo.main(["--seeds", "0", "1", "2", "--output-dir", str(tmp_path)])

    dapo, sft = aggregate["stages"]["dapo"], aggregate["stages"]["sft"]
    assert dapo["pass@1 (5-12)"]["mean"] == pytest.approx(0.5)
    assert dapo["pass@1 (5-12)"]["std"] == pytest.approx(0.1)
    assert sft["pass@1 (5-12)"]["mean"] == pytest.approx(0.25)
    assert sft["pass@1 (5-12)"]["std"] == pytest.approx(0.05)
    assert dapo["pass@16 (5-12)"]["mean"] == pytest.approx(0.8) and dapo["pass@16 (5-12)"]["std"] == pytest.approx(0.1)
    assert dapo["stop_rate"]["mean"] == pytest.approx(0.95) and dapo["stop_rate"]["std"] == pytest.approx(0.05)
    assert sft["by_level"]["7"]["mean"] == pytest.approx(0.3) and sft["by_level"]["7"]["std"] == pytest.approx(0.1)
    assert dapo["pass@1 (5-12)"]["by_seed"]["2"] == {"mean": 0.6, "ci95": [0.4, 0.8]}
    gain = aggregate["gains"]["DAPO over cold start, pass@1 (5-12)"]
    assert gain["mean"] == pytest.approx(0.25) and gain["std"] == pytest.approx(0.05)
    assert gain["seeds_apart"] == 2
    assert aggregate["filter"]["rows_out"]["mean"] == pytest.approx(240)
    assert aggregate["filter"]["rows_out"]["std"] == pytest.approx(10)

    text = (tmp_path / "seeds_report.md").read_text()
    assert "| stage | pass@1, levels 1-4 | pass@1, levels 5-12 | pass@16, 5-12 | maj@16, 5-12 | stops at EOS |" in text
    assert f"| {demo.STAGE_NAMES['dapo']} | 0.900 ± 0.000 | 0.500 ± 0.100 | 0.800 ± 0.100 | 0.500 ± 0.100 | " in text
    assert f"| {demo.STAGE_NAMES['dapo']} | 2 | 0.900 [0.850, 0.950] | 0.600 [0.400, 0.800] |" in text
    assert f"| {demo.STAGE_NAMES['sft']} | 0 | 0.900 [0.850, 0.950] | 0.200 [0.150, 0.250] |" in text
    assert "- DAPO over cold start, pass@1 (5-12): +0.250 ± 0.050 across seeds (+0.200, +0.250, +0.300); " in text
    assert "intervals apart in 2 of 3 seeds." in text
    assert "- The filter kept 240.0 ± 10.0 of 800 problems (230, 240, 250)." in text
    assert "Ran on (all 3 seeds): commit 0123456789ab; python 3.11.9, torch 2.13.0, transformers 5.24.0" in text
    assert "torch kernels AVX512, 2 torch thread(s)" in text
    assert json.loads((tmp_path / "seeds_report.json").read_text())["stages"]["dapo"]["pass@1 (5-12)"]["std"] == (
        pytest.approx(0.1)
    )
    # the one-seed report of the same folder is not touched
    assert not (tmp_path / "report.md").exists()


def test_a_finished_seed_is_skipped_and_a_missing_one_runs_into_its_folder(tmp_path, monkeypatch):
    write_seed(tmp_path, 0)
    calls = []

    def fake_run(args):
        calls.append((args.seed, args.seeds, args.output_dir))
        args.output_dir.mkdir(parents=True)
        (args.output_dir / "report.json").write_text(json.dumps(report_for(args.seed)))
        return report_for(args.seed)["stages"]

    monkeypatch.setattr(demo, "run_one_seed", fake_run)
    aggregate = demo.main(["--seeds", "0", "2", "--output-dir", str(tmp_path), "--fast"])
    assert calls == [(2, None, tmp_path / "seed2")]
    assert aggregate["seeds"] == [0, 2]
    assert aggregate["stages"]["dapo"]["pass@1 (5-12)"]["values"] == [0.4, 0.6]
    # the environment is recorded when a seed runs: the versions the issue asks for, from this interpreter
    environment = json.loads((tmp_path / "seed2" / "environment.json").read_text())
    for name in ("torch", "transformers", "trl", "peft", "accelerate", "datasets", "math-verify"):
        assert environment["versions"][name]
    assert environment["torch_cpu_capability"] and "git_commit" in environment
    # seed 0's record (written by hand) and seed 2's (this machine) differ: the report says so
    text = (tmp_path / "seeds_report.md").read_text()
    assert "Ran on (seed 0): commit 0123456789ab" in text and "Ran on (seed 2): " in text
    assert "The seeds ran on different environments" in text


def test_a_stage_missing_from_a_seed_is_left_out_and_said(tmp_path, monkeypatch):
    write_seed(tmp_path, 0)
    write_seed(tmp_path, 1, environment=None)
    report = json.loads((tmp_path / "seed1" / "report.json").read_text())
    report["stages"]["dapo_random"] = report["stages"]["dapo"]
    (tmp_path / "seed1" / "report.json").write_text(json.dumps(report))
    monkeypatch.setattr(demo, "run_one_seed", no_run)
    aggregate = demo.main(["--seeds", "0", "1", "--output-dir", str(tmp_path)])
    assert list(aggregate["stages"]) == ["base", "sft", "dapo"] and aggregate["left_out"] == ["dapo_random"]
    text = (tmp_path / "seeds_report.md").read_text()
    assert "- Left out (not run in every seed): dapo_random." in text
    assert "Not recorded for seed(s) 1." in text


@pytest.mark.parametrize("argv", [["--seeds", "0", "0"], ["--seed", "1", "--seeds", "0", "1"]])
def test_seed_lists_that_make_no_sense_are_refused(argv, capsys):
    with pytest.raises(SystemExit):
        demo.parse_args(argv)
    assert "--seed" in capsys.readouterr().err


def test_one_seed_default_is_unchanged():
    args = demo.parse_args([])
    assert args.seed == 0 and args.seeds is None and args.output_dir == REPO / "artifacts" / "demo"
