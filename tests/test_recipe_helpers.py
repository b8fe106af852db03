"""The small helpers that the recipe scripts' stories call (issue 17 moved them out of the scripts): each checked
against values written out by hand."""

from __future__ import annotations

import pytest

from basics.atomic_files import write_json, write_jsonl
from recipes.common import held_out_eval as held_out
from recipes.common.fingerprint import SAMPLING_FIELDS, changes, sampling_fingerprint, stale
from recipes.common.model.loading import with_kv_cache
from recipes.stages.distill.arguments import DistillScriptArguments
from recipes.stages.rejection_sampling.arguments import RejectionSamplingArguments
from recipes.stages.rejection_sampling.rounds import previously_solved, read_round
from recipes.stages.rejection_sampling.state import Phase, RoundState


def test_generation_keeps_the_kv_cache_on_unless_the_config_says_otherwise():
    assert with_kv_cache(None) == {"use_cache": True}
    assert with_kv_cache({"top_k": 5}) == {"use_cache": True, "top_k": 5}
    assert with_kv_cache({"use_cache": False}) == {"use_cache": False}


def test_a_sampling_fingerprint_holds_the_data_and_the_sampling_options():
    args = DistillScriptArguments(teacher_model_name_or_path="t", dataset_name="synthetic:1-2", sampling={"n": 3})
    fingerprint = sampling_fingerprint(args, ("verify_traces",))
    assert fingerprint["data"]["dataset_name"] == "synthetic:1-2"
    assert fingerprint["data"]["data_file"] == "synthetic:1-2"  # not a file: the name stands for itself
    assert set(fingerprint["sampling"]) == {*SAMPLING_FIELDS, "verify_traces"}
    assert fingerprint["sampling"]["sampling"]["n"] == 3 and fingerprint["sampling"]["verify_traces"] is True


def test_stale_says_what_changed_and_nothing_when_there_is_no_cache():
    new = {"sampling": {"n": 4}, "seed": 1}
    assert stale(None, new) == [] and stale({}, new) == []  # nothing cached: nothing to redo
    assert stale({"fingerprint": new}, new) == []
    assert stale({"fingerprint": {"sampling": {"n": 2}, "seed": 1}}, new) == ["sampling.n: 2 -> 4"]
    assert stale({"complete": True}, new) == changes(None, new)  # stats from before fingerprints: redone


def test_a_round_is_read_back_only_when_its_inputs_are_the_same(tmp_path):
    fingerprint = {"sampling": {"n": 4}}
    write_json(tmp_path / "stats.json", {"round": 1, "complete": True, "model": "m", "fingerprint": fingerprint})
    state = read_round(tmp_path, 1, fingerprint)
    assert (state.phase, state.finished, state.model) == (Phase.TRAINED, True, "m")
    assert read_round(tmp_path, 1, {"sampling": {"n": 8}}) == RoundState(round=1)  # made from other inputs
    assert read_round(tmp_path / "missing", 1, fingerprint) == RoundState(round=1)
    write_json(tmp_path / "stats.json", {"round": 1, "sampled": True, "fingerprint": fingerprint})
    assert read_round(tmp_path, 1, fingerprint).phase is Phase.NEW  # sampled, but its dataset.jsonl is gone
    write_jsonl(tmp_path / "dataset.jsonl", [{"id": "a"}])
    assert read_round(tmp_path, 1, fingerprint).phase is Phase.SAMPLED


def test_a_round_state_writes_the_stats_a_rerun_and_the_reports_read():
    counts = {"problems": 4, "problems_solved": 2, "samples_kept": 3, "rationalized_kept": 1}
    state = RoundState(2, Phase.SAMPLED, "start", counts, {"f": 1}, pass_at_1_before={"pass@1": 0.25})
    assert state.to_json() == {"round": 2, "start_model": "start", "sampled": True, **counts, "fingerprint": {"f": 1}}
    state.new_problems_solved = 2
    state.phase, state.model, state.pass_at_1_after = Phase.TRAINED, "round_2/model", {"pass@1": 0.5}
    trained = state.to_json()
    assert trained == {
        "round": 2, "start_model": "start", "sampled": True, **counts, "fingerprint": {"f": 1},
        "new_problems_solved": 2, "pass@1_before": {"pass@1": 0.25}, "complete": True, "model": "round_2/model",
        "pass@1_after": {"pass@1": 0.5},
    }  # fmt: skip
    assert RoundState.from_json(trained) == state and state.samples_kept == 4
    stopped = RoundState(3, Phase.STOPPED, "s", {}, {}, new_problems_solved=0, model="s", stopped_because="no new")
    assert stopped.to_json()["stopped"] == "no new" and "pass@1_after" not in stopped.to_json()
    assert RoundState.from_json(stopped.to_json()) == stopped


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

    monkeypatch.setattr(held_out, "make_trace_sampler", make)
    monkeypatch.setattr(held_out, "evaluate_pass_at_1", measure)
    args = RejectionSamplingArguments(eval_samples_per_problem=0)
    assert held_out.evaluate_model(args, "m", [{"id": "x"}], seed=0) is None
    assert held_out.evaluate_model(RejectionSamplingArguments(), "m", [], seed=0) is None
    assert events == []  # evaluation off, or nothing held out: no model loaded
    with pytest.raises(RuntimeError, match="out of memory"):
        held_out.evaluate_model(RejectionSamplingArguments(), "m", [{"id": "x"}], seed=0, n=1)
    assert events == ["loaded m", "measured 1 rows, n=1", "closed"]  # freed even when measuring fails
