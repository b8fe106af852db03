"""Evaluation's tool sampler (eval/tools/trl_sampling.py) runs a batch's python calls side by side, as GRPO does:
its trainer is TRL's with the one override that starts each turn's parsed calls before TRL's loop makes them
(eval.tools.stats.ToolCalls.ahead_of). A scripted policy (tests/test_eval_tools.py's script) calls the tool on 3
rows, each call sleeping 0.3 s in the sandbox; the calls overlap, each ran once, and each reply is its own."""

from __future__ import annotations

SPAN = "import time\nstart = time.time()\ntime.sleep(0.3)\nprint(start, time.time())"


def test_the_tool_samplers_calls_run_side_by_side(tiny_model_dir, monkeypatch, two_sandbox_runs):
    from eval.sampling import SamplingParams
    from eval.tools.trl_sampling import make_tool_sampler
    from tests.support.tool_runs import record_tool_runs
    from tests.test_eval_tools import script

    launched = record_tool_runs(monkeypatch)
    sampler = make_tool_sampler(str(tiny_model_dir), ["python"], {"timeout_s": 2.0}, max_tool_calls=1, batch_size=4)
    try:
        script(sampler, {0: SPAN, 1: SPAN, 3: SPAN})
        prompt = [{"role": "user", "content": "What is 6*7?"}]
        (samples,) = sampler.generate([prompt], SamplingParams(n=4, max_new_tokens=400, temperature=1.0, seed=1))
    finally:
        sampler.close()
    replies = [m["content"] for s in samples for m in s.tool_use["conversation"] if m.get("role") == "tool"]
    spans = sorted(tuple(map(float, reply.split())) for reply in replies)
    assert len(spans) == len(launched) == 3 and [s.tool_use["tool_calls"] for s in samples] == [1, 1, 0, 1]
    assert spans[1][0] < spans[0][1], spans  # the first two overlapped
