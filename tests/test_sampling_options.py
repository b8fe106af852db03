"""eval.sampling_options.SamplingOptions: the one type of the sampling options (issue 39, item 2), the same
spelling in a recipe's `sampling:` mapping, a filter step and eval's flags; and the options it replaced, which a
config written for them is told about."""

from __future__ import annotations

import argparse

import pytest

from eval.sampler import DEFAULT_MAX_NEW_TOKENS, SamplingParams
from eval.sampling_options import OPTION_NAMES, SamplingOptions, add_sampling_flags, options_from_flags
from recipes import rejection_sampling
from tests.test_user_errors import cli_error


def test_the_options_make_each_calls_params():
    options = SamplingOptions(n=4, temperature=0.7, top_p=0.9, top_k=20, max_new_tokens=64, backend="vllm")
    assert options.params(3) == SamplingParams(n=4, temperature=0.7, top_p=0.9, top_k=20, max_new_tokens=64, seed=3)
    assert options.params(3, n=2, temperature=1.0) == SamplingParams(2, 1.0, 0.9, 20, 64, 3)  # an evaluation's own
    assert SamplingOptions(seed=11).params(3).seed == 11  # the options' own seed wins over the run's
    assert SamplingOptions().params(0) == SamplingParams(n=8, max_new_tokens=DEFAULT_MAX_NEW_TOKENS)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"n": 0}, "sampling: n must be >= 1, got 0"),
        ({"top_p": 0}, "sampling: top_p must be in (0, 1]"),
        ({"backend": "tgi"}, "sampling: backend must be one of"),
        ({"batch_size": 0}, "sampling: batch_size must be >= 1"),
        ({"temprature": 0.5}, "unknown sampling option(s) 'temprature'; did you mean 'temperature'?"),
        ("[1, 2]", "sampling must be a mapping"),
        ("{n: 2", "sampling is not valid JSON"),
        (
            {"n:4": None, "max_new_tokens:48": None},
            "'max_new_tokens:48' is one key; write {n: 4}, with a space after each colon",
        ),
    ],
)
def test_a_wrong_option_is_one_message_that_names_it(value, message):
    with pytest.raises(ValueError) as error:
        SamplingOptions.from_mapping(value, "sampling")
    assert message in str(error.value)


def test_a_mapping_over_defaults_and_a_json_string_from_the_command_line():
    assert SamplingOptions.from_mapping(None, "s", {"n": 4}) == SamplingOptions(n=4)
    assert SamplingOptions.from_mapping('{"max_new_tokens": 16}', "s", {"n": 4}) == SamplingOptions(
        n=4, max_new_tokens=16
    )
    same = SamplingOptions(n=2)
    assert SamplingOptions.from_mapping(same, "s") is same


def test_eval_flags_are_the_options_own():
    parser = argparse.ArgumentParser()
    add_sampling_flags(parser, n=16, temperature=0.6)
    args = parser.parse_args(["--top-p", "0.95", "--max-new-tokens", "32", "--backend", "transformers"])
    assert options_from_flags(args) == SamplingOptions(
        n=16, temperature=0.6, top_p=0.95, max_new_tokens=32, backend="transformers"
    )
    flags = {action.dest for action in parser._actions} - {"help"}
    assert flags == set(OPTION_NAMES) - {"seed"}  # eval gives its seeds as --seeds, one run each


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("samples_per_problem", "sampling: {n: ...}"),
        ("sample_max_new_tokens", "sampling: {max_new_tokens: ...}"),
        ("cold_start_if_missing", "demo_model_if_missing"),
    ],
)
def test_an_option_that_moved_is_named_with_its_new_place(old, new, capsys, monkeypatch, tmp_path):
    config = tmp_path / "old.yaml"
    config.write_text(f"model_name_or_path: m\n{old}: 4\noutput_dir: {tmp_path}\n")
    line = cli_error(capsys, monkeypatch, rejection_sampling, ["--config", str(config)])
    assert f"{old} is now {new}" in line
    line = cli_error(capsys, monkeypatch, rejection_sampling, [f"--{old}", "4", "--output_dir", str(tmp_path)])
    assert f"--{old} is now {new}" in line
