"""Evaluation with tools (`python -m eval.evaluate --tools python`) through TRL's tool loop: a scripted policy calls the
python tool on some samples, the sandboxed interpreter answers, and the records, the summary's tool figures and the
token counts are checked against counts made by hand from the script. Without --tools nothing changes.

The tiny model never writes a call by itself, so each trainer the sampler builds has its turns scripted (its
`_generate_single_turn`, which TRL's loop calls for every turn, as tests/test_grpo_tools.py does); the parse, the
tool, the masks and the conversation are TRL's and the sampler's own."""

from __future__ import annotations

import json

import pytest

CALLS = {0: "print(6*7)", 2: "print(1 / 0)"}  # of each problem's 4 samples: these call python, one failing
N = 4
PROBLEMS = [("What is 6*7?", "42"), ("What is 3+4?", "7")]


def script(sampler, calls: dict[int, str] = CALLS, install: bool = True, per_problem: int = N) -> dict:
    """Every trainer `sampler` builds samples by this script (with `install`): on the first turn, each problem's
    samples whose index is in `calls` call python(code) and the others answer \\boxed{7}; after a tool result, "so
    \\boxed{42}". A batch holds whole problems of `per_problem` samples each, in order (eval/tools/trl_sampling.pack),
    so a row's sample index is its place in the batch modulo `per_problem`. Returns the token ids of each scripted
    turn, for counts by hand, and the scripted turn itself ("turn")."""
    tokenizer = sampler.tokenizer
    prompt = [{"role": "user", "content": "x"}]
    before = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)

    def call_ids(code):
        call = {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "python", "arguments": {"code": code}}}]}  # fmt: skip
        whole = tokenizer.apply_chat_template([*prompt, call], tokenize=False)
        return tokenizer(whole[len(before) :], add_special_tokens=False)["input_ids"]

    def answer(text):
        return tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]

    turns = {"calls": {row: call_ids(code) for row, code in calls.items()}, "plain": answer("\\boxed{7}")}
    turns["after_tool"] = answer("so \\boxed{42}")

    def turn(prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        if "<tool_response>" not in tokenizer.decode(prompt_ids[0]):
            ids = [turns["calls"].get(row % per_problem, turns["plain"]) for row in range(len(prompt_ids))]
        else:
            ids = [turns["after_tool"] for _ in prompt_ids]
        return ids, None

    build = sampler._build

    def scripted_build(params):
        trainer = build(params)
        trainer._generate_single_turn = turn
        return trainer

    if install:
        sampler._build = scripted_build
    return {**turns, "turn": turn}


@pytest.fixture(scope="module")
def tool_sampler(tiny_model_dir):
    from eval.tools.trl_sampling import make_tool_sampler

    sampler = make_tool_sampler(str(tiny_model_dir), ["python"], {"timeout_s": 2.0}, max_tool_calls=2, batch_size=8)
    turns = script(sampler)
    yield sampler, turns
    sampler.close()


@pytest.fixture(scope="module")
def problems_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("tool_eval") / "problems.jsonl"
    path.write_text("".join(json.dumps({"problem": q, "answer": a}) + "\n" for q, a in PROBLEMS))
    return path


def _evaluate(monkeypatch, model_dir, problems_file, out, *extra, sampler=None):
    import eval.evaluate as evaluate

    if sampler is not None:
        monkeypatch.setattr(evaluate, "make_tool_sampler", lambda *args, **kwargs: sampler)
    argv = ["--model", str(model_dir), "--dataset", str(problems_file), "--n", str(N), "--k", "1", "--output-dir",
            str(out), "--temperature", "1.0", "--top-p", "1.0", "--max-new-tokens", "250", "--backend", "transformers",
            *extra]  # fmt: skip
    evaluate.main(argv)
    folder = next(path for path in out.iterdir() if path.is_dir())
    samples = [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]
    return (
        samples,
        json.loads((folder / "summary.json").read_text()),
        json.loads((folder / "protocol.json").read_text()),
    )


@pytest.fixture(scope="module")
def tool_run(tool_sampler, tiny_model_dir, problems_file, tmp_path_factory):
    sampler, turns = tool_sampler
    with pytest.MonkeyPatch.context() as monkeypatch:
        out = tmp_path_factory.mktemp("tool_eval_out")
        samples, summary, protocol = _evaluate(
            monkeypatch, tiny_model_dir, problems_file, out, "--tools", "python", "--max-tool-calls", "2",
            "--tool-options", "timeout_s=2", sampler=sampler,
        )  # fmt: skip
    return samples, summary, protocol, turns


def test_the_progress_bar_hears_each_batch_as_it_ends(tool_sampler):
    """eval.evaluate's bar listens on SEQUENCES_DONE: with tools it moves a batch at a time (before, it sat at 0
    until a whole chunk of 64 problems was sampled)."""
    from eval.decoding import SEQUENCES_DONE
    from eval.sampling import SamplingParams

    sampler, _ = tool_sampler
    heard = []
    listening = SEQUENCES_DONE.set(heard.append)
    try:
        prompts = [[{"role": "user", "content": q}] for q, _ in PROBLEMS]
        params = SamplingParams(n=N, temperature=1.0, top_p=1.0, max_new_tokens=50, seed=0)
        generated = sampler.generate(prompts, params)
    finally:
        SEQUENCES_DONE.reset(listening)
    # batches of 8 rows hold both problems' 4 samples: one generation, heard once
    assert heard == [N * len(PROBLEMS)] and [len(samples) for samples in generated] == [N] * len(PROBLEMS)


def test_problems_share_a_batch_up_to_its_size_and_a_problem_is_cut_in_batch_sized_pieces():
    from eval.tools.trl_sampling import pack

    assert pack(5, 4, 8) == [[(0, 0, 4), (1, 0, 4)], [(2, 0, 4), (3, 0, 4)], [(4, 0, 4)]]
    assert pack(2, 5, 8) == [[(0, 0, 5)], [(1, 0, 5)]]  # a second problem's 5 would overflow 8
    assert pack(2, 10, 4) == [[(0, 0, 4)], [(0, 4, 4)], [(0, 8, 2)], [(1, 0, 4)], [(1, 4, 4)], [(1, 8, 2)]]
    assert pack(3, 3, 4) == [[(0, 0, 3)], [(1, 0, 3)], [(2, 0, 3)]] and pack(4, 2, 4) == [
        [(0, 0, 2), (1, 0, 2)],
        [(2, 0, 2), (3, 0, 2)],
    ]
    assert pack(0, 4, 8) == [] and pack(3, 1, 64) == [[(0, 0, 1), (1, 0, 1), (2, 0, 1)]]
    for problems, count, size in [(7, 3, 8), (3, 9, 4), (16, 4, 64)]:  # every sample once, no batch over size
        batches = pack(problems, count, size)
        assert all(sum(piece[2] for piece in batch) <= size for batch in batches)
        drawn = sorted((p, start + i) for batch in batches for p, start, n in batch for i in range(n))
        assert drawn == [(p, i) for p in range(problems) for i in range(count)]


def test_each_record_keeps_the_conversation_and_its_counts(tool_run):
    samples, _, protocol, _ = tool_run
    assert protocol["tools"] == {"names": ["python"], "options": {"timeout_s": 2}, "max_tool_calls": 2}
    assert len(samples) == N * len(PROBLEMS)
    for sample in samples:
        conversation = sample["conversation"]
        tool_messages = [message for message in conversation if message["role"] == "tool"]
        if sample["index"] in CALLS:
            assert [message["role"] for message in conversation] == ["assistant", "tool", "assistant"]
            call = conversation[0]["tool_calls"][0]["function"]
            assert call["name"] == "python" and call["arguments"] == {"code": CALLS[sample["index"]]}
            reply = tool_messages[0]["content"]
            assert ("42" in reply) if sample["index"] == 0 else ("ZeroDivisionError" in reply)
            assert sample["tool_calls"] == 1 and sample["turns"] == 2
            assert sample["tool_failures"] == (sample["index"] != 0)
            assert sample["extracted"] == "42" and sample["text"].endswith("so \\boxed{42}")
        else:
            assert conversation == [{"role": "assistant", "content": "\\boxed{7}"}]
            assert (sample["tool_calls"], sample["tool_failures"], sample["turns"], sample["tool_tokens"]) == (
                0,
                0,
                1,
                0,
            )
        assert sample["finish_reason"] == "stop"


def test_the_tool_figures_equal_counts_by_hand(tool_run):
    samples, summary, _, _ = tool_run
    completions = N * len(PROBLEMS)
    calls = len(CALLS) * len(PROBLEMS)
    failed = sum(1 for code in CALLS.values() if "1 / 0" in code) * len(PROBLEMS)
    # correct: the callers on 6*7 (they answer 42 after the tool), the others on 3+4 (they answer 7)
    correct = len(CALLS) + (N - len(CALLS))
    correct_with_tool = len(CALLS)
    assert sum(bool(sample["correct"]) for sample in samples) == correct
    tools = summary["tools"]
    assert tools["calls_per_completion"] == pytest.approx(calls / completions)
    assert tools["failure_frac"] == pytest.approx(failed / calls)
    assert tools["turns_mean"] == pytest.approx((completions + calls) / completions)  # a result adds a turn
    assert tools["used_tool_frac"] == pytest.approx(calls / completions)
    assert tools["correct_used_tool_frac"] == pytest.approx(correct_with_tool / correct)
    assert summary["metrics"]["pass@1"]["mean"] == pytest.approx(0.5)


def test_token_counts_are_the_models_tokens_alone(tool_run):
    samples, summary, _, turns = tool_run
    by_index = {}
    for sample in samples:
        if sample["index"] in CALLS:
            model = len(turns["calls"][sample["index"]]) + len(turns["after_tool"])
            assert sample["num_tokens"] == model and sample["tool_tokens"] > 0
        else:
            model = len(turns["plain"])
            assert sample["num_tokens"] == model
        by_index[(sample["id"], sample["index"])] = model
    # the summary's mean length (what length figures and budgets read) counts no tool result token
    assert summary["mean_tokens"] == pytest.approx(sum(by_index.values()) / len(by_index))
    assert summary["tools"]["tool_tokens_mean"] == pytest.approx(
        sum(sample["tool_tokens"] for sample in samples) / len(samples)
    )


def test_without_tools_the_records_are_as_before(monkeypatch, tiny_model_dir, problems_file, tmp_path):
    import eval.evaluate as evaluate

    def refuse(*args, **kwargs):
        raise AssertionError("the tool sampler ran without --tools")

    monkeypatch.setattr(evaluate, "make_tool_sampler", refuse)
    samples, summary, protocol = _evaluate(
        monkeypatch, tiny_model_dir, problems_file, tmp_path, "--max-new-tokens", "8"
    )
    assert {key for sample in samples for key in sample} == {
        "id", "seed", "index", "text", "extracted", "correct", "reason", "num_tokens", "finish_reason"}  # fmt: skip
    assert "tools" not in summary and "tools" not in protocol


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--tools", "pyhton"], "unknown tool 'pyhton'"),
        (["--tools", "python", "--min-thinking-tokens", "8"], "--min-thinking-tokens"),
        (["--tools", "python", "--tool-options", "timeout_s"], "not key=value"),
        (["--tools", "python", "--tool-options", "{bad json"], "not valid JSON"),
    ],
)
def test_a_tool_flag_mistake_is_one_line(tmp_path, capsys, extra, message):
    from eval.evaluate import parse_args

    with pytest.raises(SystemExit) as stop:
        parse_args(["--model", "m", "--dataset", "d", "--output-dir", str(tmp_path), *extra])
    assert stop.value.code == 2 and message in capsys.readouterr().err


def test_tool_options_read_json_or_key_value():
    from eval.tools.trl_sampling import parse_tool_options

    assert parse_tool_options('{"timeout_s": 5, "memory_mb": 256}') == {"timeout_s": 5, "memory_mb": 256}
    assert parse_tool_options("timeout_s=5, memory_mb=256 max_output_chars=1e3") == {
        "timeout_s": 5, "memory_mb": 256, "max_output_chars": 1000.0}  # fmt: skip
    assert parse_tool_options(None) == {} and parse_tool_options("") == {}


# ---------------------------------------------------------------- --budgets with tools: the model's tokens capped


class _Config:
    max_new_tokens = 250


class _Trainer:
    """What ModelTokenCap.turn reads of a trainer: its generation settings."""

    def __init__(self):
        self.generation_config, self.generation_kwargs = _Config(), {"max_new_tokens": 250}


def test_the_model_token_cap_counts_each_rows_own_tokens_across_turns():
    from eval.tools.trl_sampling import ModelTokenCap

    caps, trainer, asked = ModelTokenCap(), _Trainer(), []
    caps.cap = 6

    def generate(outputs):
        def run(prompt_ids, images, fields, num_generations, has_tool_images):
            asked.append(trainer.generation_config.max_new_tokens)
            assert trainer.generation_kwargs["max_new_tokens"] == asked[-1]
            return [list(row) for row in outputs], [[-0.1] * len(row) for row in outputs]

        return run

    first = [[1, 2], [3]]
    ids, logprobs = caps.turn(generate([list(range(10, 20)), [7, 8, 9]]), trainer, first, None, {}, 1, False)
    assert ids == [list(range(10, 16)), [7, 8, 9]] and [len(row) for row in logprobs] == [6, 3]  # cut at 6
    assert asked == [6] and trainer.generation_config.max_new_tokens == 250  # restored after the turn
    tool = [90, 91, 92, 93]  # a tool result's tokens: not the model's
    with caps.in_loop():
        later = [first[0] + ids[0] + tool, first[1] + ids[1] + tool, [5, 5, 5]]  # the last extends no turn of ours
        again, _ = caps.turn(generate([[40] * 8, [41] * 8, [42] * 8]), trainer, later, None, {}, 1, False)
        assert asked[-1] == 3  # the most any row has left: 6 - 3
        assert again == [[], [41, 41, 41], []]  # 6 used; 3 used + 3 more; unknown: nothing left
        third = [later[1] + again[1] + tool]
        assert caps.turn(generate([[1]]), trainer, third, None, {}, 1, False)[0] == [[]]  # 6 used: no generation
    assert len(asked) == 2


@pytest.fixture(scope="module")
def budget_run(tiny_model_dir, problems_file, tmp_path_factory):
    """eval.evaluate --tools python --budgets ..., its turns scripted under the sampler's own generation override
    (the trainer's `_decode_turn`, which the cap wraps), so that the cap acts on the script's turns."""
    from eval.tools.trl_sampling import make_tool_sampler

    sampler = make_tool_sampler(str(tiny_model_dir), ["python"], {"timeout_s": 2.0}, max_tool_calls=2, batch_size=8)
    turns = script(sampler, install=False)
    scripted = turns["turn"]
    calls = [len(turns["calls"][row]) for row in sorted(CALLS)]
    budgets = [len(turns["plain"]) + 1, min(calls) + 2, 1000]
    out = tmp_path_factory.mktemp("tool_budgets")
    import eval.evaluate as evaluate

    build = sampler._build

    def scripted_build(params):
        trainer = build(params)
        trainer._decode_turn = scripted
        return trainer

    sampler._build = scripted_build
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(evaluate, "make_tool_sampler", lambda *args, **kwargs: sampler)
        evaluate.main(
            ["--model", str(tiny_model_dir), "--dataset", str(problems_file), "--n", str(N), "--k", "1",
             "--output-dir", str(out), "--temperature", "1.0", "--max-new-tokens", "250", "--tools", "python",
             "--max-tool-calls", "2", "--budgets", *map(str, budgets)]
        )  # fmt: skip
    sampler.close()
    return out, budgets, turns


def test_a_budget_caps_the_models_tokens_and_not_the_tools(budget_run):
    out, budgets, turns = budget_run
    slug = next((out / f"budget_{budgets[0]}").iterdir()).name
    tool_rows = 0
    for budget in budgets:
        folder = out / f"budget_{budget}" / slug
        assert json.loads((folder / "protocol.json").read_text())["forcing"] == {"model_token_cap": budget}
        for sample in map(json.loads, (folder / "samples.jsonl").read_text().splitlines()):
            if sample["index"] in CALLS:  # a call, then the answer after its result: by hand, turn by turn
                call = len(turns["calls"][sample["index"]])
                if call > budget:  # the call itself cut: no call is made
                    expected, calls = budget, 0
                else:
                    expected, calls = call + min(budget - call, len(turns["after_tool"])), 1
                assert (sample["num_tokens"], sample["tool_calls"]) == (expected, calls), (budget, sample)
                tool_rows += calls and sample["tool_tokens"] > 0
            else:
                assert sample["num_tokens"] == min(budget, len(turns["plain"]))
    assert tool_rows > 0  # the tool ran, and its tokens were left out of the budget
    curve = json.loads((out / "budget_curve" / f"{slug}.json").read_text())
    assert sorted(curve, key=int) == [str(budget) for budget in sorted(budgets)]
    assert all("mean_model_tokens" in point for point in curve.values())
    assert curve[str(budgets[0])]["mean_model_tokens"] < curve["1000"]["mean_model_tokens"]


def test_a_turn_is_decoded_as_trls_generate_decodes_it_greedily(tiny_model_dir):
    """The sampler's turns go through eval.decoding (a repeated prompt prefilled once, a finished row out of the
    batch) instead of TRL's `generate`: greedy, both give the same tokens, prompts of several lengths in one batch."""
    import trl

    from eval.sampling import SamplingParams
    from eval.tools.trl_sampling import make_tool_sampler

    sampler = make_tool_sampler(str(tiny_model_dir), ["python"], {"timeout_s": 2.0}, max_tool_calls=1, batch_size=8)
    try:
        trainer = sampler.trainer_for(SamplingParams(temperature=0, max_new_tokens=12))
        encode = sampler.tokenizer.encode
        prompt_ids = [encode("What is 6*7?"), encode("What is 6*7?"), encode("Add 3 and 4, then double it."), [5]]
        ours, _ = trainer._decode_turn(prompt_ids, None, {}, 1)
        theirs, _ = trl.GRPOTrainer._generate_single_turn(trainer, prompt_ids, None, {}, 1)
    finally:
        sampler.close()
    assert ours == theirs and all(0 < len(row) <= 12 for row in ours)
