"""eval/evaluate.py and eval/compare.py end to end on the tiny model: files written as the run goes,
metrics that agree with the samples on disk, resume after a kill, 1 process vs 2, and the comparison."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from eval import compare, evaluate
from eval.metrics import pass_at_k
from tests.conftest import REPO


def run_args(model, out, *extra):
    return [
        "--model", str(model), "--dataset", "synthetic:1-2", "--num-rows", "3", "--n", "4", "--k", "1", "2", "4",
        "--seeds", "0", "1", "--max-new-tokens", "40", "--temperature", "1.0", "--top-p", "1.0",
        "--backend", "transformers", "--output-dir", str(out), "--chunk-size", "2", *extra,
    ]  # fmt: skip


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def finished_run(trained_tiny_model_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("eval") / "run"
    evaluate.main(run_args(trained_tiny_model_dir, out))
    return out / "synthetic_1-2"


def test_a_run_writes_samples_problems_summary_and_plot(finished_run, capsys):
    samples = read_jsonl(finished_run / "samples.jsonl")
    assert len(samples) == 2 * 3 * 4 * 2  # levels x problems x n x seeds
    assert {key for sample in samples for key in sample} >= {
        "id",
        "seed",
        "index",
        "text",
        "extracted",
        "correct",
        "reason",
        "num_tokens",
        "finish_reason",
    }
    problems = read_jsonl(finished_run / "per_problem.jsonl")
    assert len(problems) == 6
    summary = json.loads((finished_run / "summary.json").read_text())
    assert summary["problems"] == 6
    for name in ("pass@1", "pass@2", "pass@4", "maj@4", "mean@n"):
        metric = summary["metrics"][name]
        assert metric["ci95"][0] <= metric["mean"] <= metric["ci95"][1]
    assert set(summary["metrics"]["pass@1"]["by_seed"]) == {"0", "1"}
    protocol = summary["protocol"]
    assert (protocol["n"], protocol["temperature"], protocol["seeds"]) == (4, 1.0, [0, 1])
    assert "torch" in protocol["versions"] and protocol["date"]
    assert (finished_run / "pass_at_k.png").stat().st_size > 1000
    assert 0.0 < summary["metrics"]["pass@4"]["mean"]  # the trained tiny model solves some of levels 1-2


def test_problem_metrics_agree_with_the_samples_on_disk(finished_run):
    """Counts and pass@k recomputed independently from samples.jsonl."""
    samples = read_jsonl(finished_run / "samples.jsonl")
    for problem in read_jsonl(finished_run / "per_problem.jsonl"):
        values = {k: [] for k in (1, 2, 4)}
        for seed in (0, 1):
            mine = [s for s in samples if s["id"] == problem["id"] and s["seed"] == seed]
            assert sorted(s["index"] for s in mine) == [0, 1, 2, 3]
            c = sum(s["correct"] for s in mine)
            assert problem["seeds"][str(seed)] == {"n": 4, "c": c}
            for k in values:
                values[k].append(pass_at_k(4, c, k))
        for k, per_seed in values.items():
            assert problem[f"pass@{k}"] == pytest.approx(sum(per_seed) / 2)
        assert problem["maj@1"] == pytest.approx(problem["pass@1"])  # one vote is the sample itself


def test_an_interrupted_run_resumes_to_the_same_results(trained_tiny_model_dir, finished_run, tmp_path, monkeypatch):
    out = tmp_path / "resumed"
    real_append, calls = evaluate.append_lines, {"n": 0}

    def killed_after_three_chunks(path, records):
        calls["n"] += 1
        if calls["n"] == 4:
            path.open("a").write(json.dumps(records[0])[:25])  # a torn line, as a kill mid-write leaves
            raise KeyboardInterrupt
        real_append(path, records)

    monkeypatch.setattr(evaluate, "append_lines", killed_after_three_chunks)
    with pytest.raises(KeyboardInterrupt):
        evaluate.main(run_args(trained_tiny_model_dir, out))
    monkeypatch.setattr(evaluate, "append_lines", real_append)

    generated = []
    from eval.sampler import TransformersSampler

    original = TransformersSampler.generate
    monkeypatch.setattr(
        TransformersSampler,
        "generate",
        lambda self, prompts, params, keys=None: generated.extend(keys) or original(self, prompts, params, keys),
    )
    evaluate.main(run_args(trained_tiny_model_dir, out))
    assert len(generated) == 2 * 6 - 3 * 2  # three chunks of two problems were already on disk
    folder = out / "synthetic_1-2"
    assert (folder / "per_problem.jsonl").read_text() == (finished_run / "per_problem.jsonl").read_text()
    assert (folder / "samples.jsonl").read_text() == (finished_run / "samples.jsonl").read_text()


def test_a_different_protocol_refuses_to_mix(trained_tiny_model_dir, finished_run):
    out = finished_run.parent
    with pytest.raises(SystemExit, match="another protocol"):
        evaluate.main(run_args(trained_tiny_model_dir, out, "--max-new-tokens", "20"))


def test_two_processes_give_the_same_results_as_one(trained_tiny_model_dir, finished_run, tmp_path):
    """accelerate starts 2 CPU processes with --multi_gpu --num_processes 2 (gloo); problems are sharded."""
    out = tmp_path / "two"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2"]
    command += ["--main_process_port", "0", "-m", "eval.evaluate", *run_args(trained_tiny_model_dir, out)]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600, cwd=REPO)
    assert result.returncode == 0, result.stderr[-3000:]
    protocol = json.loads((out / "synthetic_1-2" / "protocol.json").read_text())
    assert protocol["processes"] == 2
    assert (out / "synthetic_1-2" / "per_problem.jsonl").read_text() == (finished_run / "per_problem.jsonl").read_text()


def test_k_larger_than_n_is_refused():
    with pytest.raises(SystemExit):
        evaluate.parse_args(["--model", "m", "--dataset", "d", "--output-dir", "o", "--n", "4", "--k", "8"])


# ---------------------------------------------------------------- compare


def write_run(folder, name, curve, solved):
    """A finished run by hand: pass@k means per k, and per-problem pass@8 values."""
    dataset = folder / name / "set"
    dataset.mkdir(parents=True)
    metrics = {f"pass@{k}": {"mean": value, "ci95": [value - 0.05, value + 0.05]} for k, value in curve.items()}
    (dataset / "summary.json").write_text(json.dumps({"metrics": metrics}))
    (dataset / "per_problem.jsonl").write_text(
        "".join(json.dumps({"id": pid, "pass@8": v}) + "\n" for pid, v in solved.items())
    )
    return folder / name


def test_compare_finds_the_crossover_and_the_gained_and_lost_problems(tmp_path):
    base = write_run(tmp_path, "base", {1: 0.2, 2: 0.3, 4: 0.45, 8: 0.6}, {"p1": 1.0, "p2": 1.0, "p3": 0.0, "p4": 0.0})
    rl = write_run(tmp_path, "rl", {1: 0.3, 2: 0.35, 4: 0.4, 8: 0.45}, {"p1": 1.0, "p2": 0.0, "p3": 1.0, "p4": 0.0})
    report = compare.compare(base, rl, tmp_path / "report")
    # differences rl - base: +0.10, +0.05, -0.05, -0.15: the sign changes between k=2 and k=4, at log2 k = 1.5
    assert "near k = 2.8" in report
    assert "solved only by base: 1; only by rl: 1" in report
    assert "only base: p2" in report and "only rl: p3" in report
    # pass@8 per problem, rl - base: 0, -1, +1, 0: the paired mean is 0 although the curves differ by -0.15
    assert "| 8 | 0.600 [0.550, 0.650] | 0.450 [0.400, 0.500] | -0.150 | +0.000 [" in report
    assert (tmp_path / "report" / "pass_at_k_set.png").exists()
    assert compare.crossover([1, 2], [0.5, 0.6], [0.4, 0.5]) is None


def test_compare_on_real_runs(finished_run, tmp_path):
    report = compare.compare(finished_run.parent, finished_run.parent, tmp_path / "same")
    assert "only by run: 0; only by run: 0" in report
    assert "| +0.000 [+0.000, +0.000] |" in report  # a run against itself: no difference, no interval
