"""basics.did_you_mean: the one 'did you mean ...?' of every message that offers the nearest known name."""

from __future__ import annotations

from basics.did_you_mean import did_you_mean, nearest_name, unknown_names_message


def test_the_nearest_name_by_spelling_then_by_abbreviation():
    known = ["--learning_rate", "--max-new-tokens", "--temperature", "--top-p", "--top-k"]
    assert nearest_name("--learnig_rate", known) == "--learning_rate"
    assert nearest_name("--max_new_tokens", known) == "--max-new-tokens"  # dashes and underscores alike
    assert nearest_name("--temp", known) == "--temperature"  # one name it abbreviates
    assert nearest_name("--t", ["--top-p", "--top-k"]) is None  # abbreviates two: no guess
    assert nearest_name("--zzz", known) is None


def test_the_phrase_for_one_word_several_and_none():
    known = ["alpha", "beta", "gamma"]
    assert did_you_mean(["alpah"], known) == "did you mean alpha?"
    assert did_you_mean(["alpah", "bta"], known, cutoff=0.6) == "did you mean alpha for alpah, beta for bta?"
    assert did_you_mean(["alpah"], known, quote=True) == "did you mean 'alpha'?"
    assert did_you_mean(["zzz"], known) == ""
    assert did_you_mean(["--alpah"], ["--alpha"], render=lambda word, match: match.upper()) == "did you mean --ALPHA?"
    assert unknown_names_message(["alpah"], known, "option") == (
        "unknown option(s) 'alpah'; did you mean 'alpha'? (known: alpha, beta, gamma)"
    )
