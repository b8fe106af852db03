"""scripts/bench/tool_sampling.py on the SmolLM2 stand-in (real tokenizer and tool template, random weights): every
arm samples every problem's n samples, the first two through TRL's generate, the last two through eval.decoding,
and only the last with shared prefixes."""

from __future__ import annotations

import sys

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))

from scripts.bench import tool_sampling  # noqa: E402


def test_every_arm_samples_the_problems_its_own_way(smol_standin_dir, monkeypatch, capsys):
    import trl

    import eval.decoding as decoding

    seen = []
    trls, ours = trl.GRPOTrainer._generate_single_turn, decoding.sample_tokens

    def trl_turn(self, *args, **kwargs):
        seen.append("trl")
        return trls(self, *args, **kwargs)

    def our_turn(*args, **kwargs):
        seen.append("shared" if kwargs.get("share_prefixes") and decoding.MIN_SHARED_PREFIX < 10**9 else "whole")
        return ours(*args, **kwargs)

    monkeypatch.setattr(trl.GRPOTrainer, "_generate_single_turn", trl_turn)
    monkeypatch.setattr(decoding, "sample_tokens", our_turn)
    arms = []
    real = tool_sampling.sample_arm

    def sample_arm(arm, *args):
        seen.clear()
        result = real(arm, *args)
        arms.append((arm, set(seen)))
        return result

    monkeypatch.setattr(tool_sampling, "sample_arm", sample_arm)
    out = tool_sampling.main(["--model", str(smol_standin_dir), "--problems", "1", "--n", "2", "--repeats", "1",
                              "--max-new-tokens", "8"])  # fmt: skip
    assert arms == [(tool_sampling.ARMS[0], {"trl"}), (tool_sampling.ARMS[1], {"trl"}),
                    (tool_sampling.ARMS[2], {"whole"}), (tool_sampling.ARMS[3], {"shared"})]  # fmt: skip
    assert all(entry["samples"] == 4 * 2 for entry in out.values())
    assert out[tool_sampling.ARMS[0]]["speedup"] == 1.0
    printed = capsys.readouterr().out
    assert all(f"| {arm} |" in printed for arm in tool_sampling.ARMS) and "speed-up over the first" in printed
