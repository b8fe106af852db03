"""The small helpers that the recipe scripts' stories call (issue 17 moved them out of the scripts): each checked
against values written out by hand."""

from __future__ import annotations

import pytest

from recipes.common import traces
from recipes.common.arguments import DistillScriptArguments, RejectionSamplingArguments
from recipes.common.fingerprint import SAMPLING_FIELDS, changes, sampling_fingerprint, stale
from recipes.common.model import with_kv_cache
from recipes.common.rounds import previously_solved, read_round
from tasks.files import write_json, write_jsonl


def test_generation_keeps_the_kv_cache_on_unless_the_config_says_otherwise():
    assert with_kv_cache(None) == {"use_cache": True}
    assert with_kv_cache({"top_k": 5}) == {"use_cache": True, "top_k": 5}
    assert with_kv_cache({"use_cache": False}) == {"use_cache": False}


def test_a_sampling_fingerprint_holds_the_data_and_the_sampling_options():
    args = DistillScriptArguments(teacher_model_name_or_path="t", dataset_name="synthetic:1-2", samples_per_problem=3)
    fingerprint = sampling_fingerprint(args, ("verify_traces",))
    assert fingerprint["data"]["dataset_name"] == "synthetic:1-2"
    assert fingerprint["data"]["data_file"] == "synthetic:1-2"  # not a file: the name stands for itself
    assert set(fingerprint["sampling"]) == {*SAMPLING_FIELDS, "verify_traces"}
    assert fingerprint["sampling"]["samples_per_problem"] == 3 and fingerprint["sampling"]["verify_traces"] is True


def test_stale_says_what_changed_and_nothing_when_there_is_no_cache():
    new = {"sampling": {"n": 4}, "seed": 1}
    assert stale(None, new) == [] and stale({}, new) == []  # nothing cached: nothing to redo
    assert stale({"fingerprint": new}, new) == []
    assert stale({"fingerprint": {"sampling": {"n": 2}, "seed": 1}}, new) == ["sampling.n: 2 -> 4"]
    assert stale({"complete": True}, new) == changes(None, new)  # stats from before fingerprints: redone


def test_a_round_is_read_back_only_when_its_inputs_are_the_same(tmp_path):
    fingerprint = {"sampling": {"n": 4}}
    write_json(tmp_path / "stats.json", {"complete": True, "fingerprint": fingerprint})
    assert read_round(tmp_path, 1, fingerprint) == {"complete": True, "fingerprint": fingerprint}
    assert read_round(tmp_path, 1, {"sampling": {"n": 8}}) == {}
    assert read_round(tmp_path / "missing", 1, fingerprint) == {}


def test_previously_solved_counts_sampled_problems_of_earlier_rounds_only(tmp_path):
    write_jsonl(tmp_path / "round_1" / "dataset.jsonl", [{"id": "a"}, {"id": "b", "rationalized": True}])
    write_jsonl(tmp_path / "round_2" / "dataset.jsonl", [{"id": "c"}])
    assert previously_solved(tmp_path, 1) == set()
    assert previously_solved(tmp_path, 2) == {"a"}  # b was only rationalised, round 2 is not earlier
    assert previously_solved(tmp_path, 3) == {"a", "c"}


def test_evaluating_a_model_loads_it_only_when_evaluation_is_on_and_frees_it_after(monkeypatch):
    events = []

    class Sampler:
        def close(self):
            events.append("closed")

    def make(args, model_path):
        events.append(f"loaded {model_path}")
        return Sampler()

    def measure(sampler, rows, args, seed, n=None):
        events.append(f"measured {len(rows)} rows, n={n}")
        raise RuntimeError("out of memory")

    monkeypatch.setattr(traces, "make_trace_sampler", make)
    monkeypatch.setattr(traces, "evaluate_pass_at_1", measure)
    args = RejectionSamplingArguments(eval_samples_per_problem=0)
    assert traces.evaluate_model(args, "m", [{"id": "x"}], seed=0) is None
    assert traces.evaluate_model(RejectionSamplingArguments(), "m", [], seed=0) is None
    assert events == []  # evaluation off, or nothing held out: no model loaded
    with pytest.raises(RuntimeError, match="out of memory"):
        traces.evaluate_model(RejectionSamplingArguments(), "m", [{"id": "x"}], seed=0, n=1)
    assert events == ["loaded m", "measured 1 rows, n=1", "closed"]  # freed even when measuring fails
